"""Small helpers for tests of the hub's gRPC server: a hub that serves it, its address, and
the A2A reason of a gRPC error."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc.aio
import httpx
from a2a.utils.grpc_status import status_from_call
from google.rpc import error_details_pb2

from persona_agent.api.app import create_app
from tests.fakes.fake_llm import FakeLLM
from tests.integration.conftest import Hub, loopback_socket, serving, settings_of
from tests.personas import BUNDLED

__all__ = ["error_reason", "grpc_address", "grpc_hub"]


@asynccontextmanager
async def grpc_hub(root: Path, llm: FakeLLM, **overrides: Any) -> AsyncIterator[Hub]:
    """A hub of the bundled personas serving gRPC on a free port, with ``overrides`` of
    its settings (``root``: a fresh directory for its personas and data)."""
    shutil.copytree(BUNDLED, root / "personas")
    sock, base_url = loopback_socket()
    values: dict[str, Any] = {
        "personas_dir": root / "personas",
        "data_dir": root / "data",
        "public_base_url": base_url,
        "llm_base_url": llm.base_url,
        "llm_api_key": "test-key",
        "llm_max_retries": 0,
        "llm_timeout": 10,
        "mcp_config": None,
        "watch_personas": False,
        "grpc_port": 0,
        "shutdown_grace_seconds": 2,
    }
    values.update(overrides)
    settings = settings_of(**values)
    app = create_app(settings)
    async with serving(app, sock), httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        yield Hub(app, http, settings)


def grpc_address(hub: Hub) -> str:
    """The address of the hub's gRPC server (its cards say it)."""
    address = getattr(hub.app, "parts").registry.grpc_address  # noqa: B009 (HubApp's)
    assert isinstance(address, str), "this hub serves no gRPC (grpc_port unset)"
    return address


def error_reason(error: grpc.aio.AioRpcError) -> str | None:
    """The A2A reason of a gRPC error (the ``google.rpc.ErrorInfo`` of its status)."""
    status = status_from_call(error)
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return str(info.reason)
    return None
