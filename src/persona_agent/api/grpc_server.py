"""The hub's gRPC server: a part of the app's lifespan, in its event loop, on a port of its own.

Off unless ``PERSONA_AGENT_GRPC_PORT`` is set (docs/a2a.md#grpc says why and what it
costs). Started after the A2A part (it serves the registry's personas) and stopped before
it: calls still running get ``shutdown_grace_seconds`` to finish, as on HTTP.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc.aio
from a2a.types import a2a_pb2_grpc

from persona_agent.a2a.grpc_service import HubGrpcService
from persona_agent.api.serving import A2AParts
from persona_agent.errors import ConfigError
from persona_agent.settings import Settings

__all__ = ["GrpcServer", "build_grpc"]

logger = logging.getLogger(__name__)


@dataclass
class GrpcServer:
    """The server (when ``port`` is set): started on entering ``running()``, its address
    then on every card (``address``)."""

    a2a: A2AParts
    settings: Settings
    port: int | None
    address: str | None = None
    """``host:port`` the cards say, once listening."""
    bound_port: int | None = None
    """The port listened on (the free one chosen for 0)."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self.port is None:
            yield
            return
        settings, registry = self.settings, self.a2a.registry
        size = settings.max_message_bytes
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", -1),
                ("grpc.so_reuseport", 0),
            ]
        )
        service = HubGrpcService(
            registry.app_for, registry.local_handler, registry.directory.handler, self.a2a.services
        )
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(service, server)
        host = settings.grpc_listen_host
        listen = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        try:
            bound = server.add_insecure_port(listen)
        except RuntimeError as error:
            raise ConfigError(
                f"gRPC: cannot listen on {listen} ({error}): set PERSONA_AGENT_GRPC_PORT to a "
                "free port (0 picks one), or unset it to serve no gRPC"
            ) from None
        await server.start()
        self.bound_port = bound
        self.address = settings.grpc_address(bound)
        registry.serve_grpc(self.address)
        logger.info("gRPC: serving every persona on %s:%d (tenant = persona id)", host, bound)
        try:
            yield
        finally:
            registry.serve_grpc(None)
            await server.stop(settings.shutdown_grace_seconds or None)


def build_grpc(settings: Settings, a2a: A2AParts) -> GrpcServer:
    """The gRPC server of the settings (a part that does nothing when it is off)."""
    return GrpcServer(a2a, settings, settings.grpc_port)
