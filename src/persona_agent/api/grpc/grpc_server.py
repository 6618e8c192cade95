"""The hub's gRPC server: a part of the app's lifespan, in its event loop, on a port of its own.

Off unless ``PERSONA_AGENT_GRPC_PORT`` is set (docs/a2a.md#grpc says why and what it
costs). Started after the A2A part (it serves the registry's personas) and stopped before
it: calls still running get ``shutdown_grace_seconds`` to finish, as on HTTP.

Its connections are bounded by grpc core's own options (:func:`server_options`): a cap on
connections held (one more is closed as it is accepted), below the process's descriptor
limit so the HTTP port keeps descriptors; a handshake deadline; an idle timeout that pings
do not reset; a maximum age; keepalive pings that drop vanished peers; a ping policy; and
calls a connection (docs/a2a.md#grpc-connections).
"""

from __future__ import annotations

import logging
import resource
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from persona_agent.errors import ConfigError
from persona_agent.hub.a2a_parts import A2AParts
from persona_agent.settings import Settings

__all__ = ["GrpcServer", "build_grpc", "connection_cap", "descriptor_limit", "server_options"]

logger = logging.getLogger(__name__)

KEEPALIVE_TIMEOUT_MS = 20_000
"""How long a peer has to answer the server's keepalive ping (grpc's default)."""

MIN_CLIENT_PING_INTERVAL_MS = 10_000
"""The shortest interval between a client's pings the server lets pass while a call is open
(with none open: two hours, grpc's rule); the third ping sooner closes the connection
(GOAWAY ``too_many_pings``)."""


def descriptor_limit() -> int | None:
    """The process's soft limit on open file descriptors (None: unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def connection_cap(wanted: int, descriptors: int | None) -> int:
    """The gRPC connections to hold at most: ``wanted``, and never more than half of
    ``descriptors`` (the process's limit), so that a flood of gRPC connections leaves the
    HTTP port, files and the database the other half."""
    if descriptors is None:
        return wanted
    return max(1, min(wanted, descriptors // 2))


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def server_options(settings: Settings, connections: int) -> list[tuple[str, int]]:
    """grpc core's options for the hub's server: message sizes, and the bounds of its
    connections (``connections`` held at most: :func:`connection_cap`)."""
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
        # Accepted past the cap: closed at once (its descriptor freed).
        ("grpc.max_allowed_incoming_connections", connections),
        # No HTTP/2 preface and settings by then: closed.
        ("grpc.server_handshake_timeout_ms", _ms(settings.grpc_handshake_timeout)),
        # No call open for this long (pings or not): GOAWAY, then closed.
        ("grpc.max_connection_idle_ms", _ms(settings.grpc_idle_timeout)),
        ("grpc.max_concurrent_streams", settings.grpc_max_streams),
        # The server's pings, on connections whose calls are silent: a dead peer is dropped.
        ("grpc.keepalive_time_ms", _ms(settings.grpc_keepalive_interval)),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.max_pings_without_data", 0),
        # The clients' pings: every 10 s at most while a call is open, every 2 h without.
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_CLIENT_PING_INTERVAL_MS),
        ("grpc.http2.max_ping_strikes", 2),
    ]
    if settings.grpc_max_connection_age:
        options.append(("grpc.max_connection_age_ms", _ms(settings.grpc_max_connection_age)))
        grace = settings.grpc_max_connection_age_grace
        options.append(("grpc.max_connection_age_grace_ms", _ms(grace) if grace else 0))
    return options


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
        # Imported when the server starts: a hub without gRPC loads neither (issue 52).
        import grpc.aio
        from a2a.types import a2a_pb2_grpc

        from persona_agent.api.grpc.grpc_decoding import DecodingInterceptor
        from persona_agent.api.grpc.grpc_service import HubGrpcService

        settings, registry = self.settings, self.a2a.registry
        descriptors = descriptor_limit()
        connections = connection_cap(settings.grpc_max_connections, descriptors)
        if connections < settings.grpc_max_connections:
            logger.warning(
                "gRPC: holding at most %d connections, not PERSONA_AGENT_GRPC_MAX_CONNECTIONS="
                "%d: half the process's %d file descriptors stay for the HTTP port (raise "
                "`ulimit -n` to hold more)",
                connections,
                settings.grpc_max_connections,
                descriptors,
            )
        server = grpc.aio.server(
            interceptors=[DecodingInterceptor()], options=server_options(settings, connections)
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
        logger.info(
            "gRPC: serving every persona on %s:%d (tenant = persona id), at most %d connections",
            host,
            bound,
            connections,
        )
        try:
            yield
        finally:
            registry.serve_grpc(None)
            await server.stop(settings.shutdown_grace_seconds or None)


def build_grpc(settings: Settings, a2a: A2AParts) -> GrpcServer:
    """The gRPC server of the settings (a part that does nothing when it is off)."""
    return GrpcServer(a2a, settings, settings.grpc_port)
