"""The hub in process, driven through real HTTP with the real a2a-sdk client.

The LLM is a scripted OpenAI-compatible server on 127.0.0.1 (tests/fakes);
MCP tools come from real MCP servers over stdio and streamable HTTP
(tests/servers); tasks and history live in a real SQLite file per test.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio
import httpx
import pytest
import uvicorn
import yaml
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import AgentCard
from fastapi import FastAPI

from persona_agent.api.app import create_app
from persona_agent.settings import Settings
from tests.fakes.fake_llm import FakeLLM
from tests.migrated import SqliteTemplate
from tests.servers.hub_process import STARTUP
from tests.servers.mcp_servers import running_http_server, stdio_server_config

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "personas"

BINDINGS = ["JSONRPC", "HTTP+JSON"]
VERSIONS = ["1.0", "0.3"]
TRANSPORTS = [
    pytest.param((binding, version), id=f"{binding}-{version}")
    for binding in BINDINGS
    for version in VERSIONS
]

TOOLSMITH = {
    "name": "Tess the Toolsmith",
    "description": "A test persona who uses tools.",
    "personal_background": "Tess exists to test tool calls.",
    "language_style": {"tone": "plain"},
    "knowledge_domains": {"Arithmetic": ["addition"]},
    "tools": {"allow": ["local__add", "local__echo", "local__sleep", "remote"]},
}
HERMIT = {
    "name": "Hal the Hermit",
    "description": "A test persona with no tools at all.",
    "personal_background": "Hal keeps to himself.",
    "language_style": {"tone": "terse"},
    "knowledge_domains": {"Solitude": ["silence"]},
    "tools": {"allow": []},
}


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def llm(fake_llm_server: FakeLLM) -> FakeLLM:
    fake_llm_server.reset()
    return fake_llm_server


@pytest.fixture(scope="session")
def mcp_http_url() -> Iterator[str]:
    with running_http_server() as url:
        yield url


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "personas"
    shutil.copytree(BUNDLED, directory)
    (directory / "toolsmith.yaml").write_text(yaml.safe_dump(TOOLSMITH), encoding="utf-8")
    (directory / "hermit.yaml").write_text(yaml.safe_dump(HERMIT), encoding="utf-8")
    return directory


@pytest.fixture
def mcp_config_file(mcp_servers_file: Path) -> Path | None:
    """The MCP configuration ``hub_factory``'s hubs start with: the test servers. A module
    whose tests call no tool makes it None (each stdio server is a process of about 1 s of
    CPU); a test of tools there passes ``mcp_config=mcp_servers_file``."""
    return mcp_servers_file


@pytest.fixture
def mcp_servers_file(tmp_path: Path, mcp_http_url: str) -> Path:
    """A configuration of two test MCP servers: ``local`` over stdio (a process of each
    hub), ``remote`` over streamable HTTP (one server for the session)."""
    path = tmp_path / "mcp.json"
    config = {
        "servers": {
            "local": stdio_server_config("local"),
            "remote": {"url": mcp_http_url, "timeout": 10},
        }
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@dataclass
class Hub:
    app: FastAPI
    http: httpx.AsyncClient
    settings: Settings

    async def card(self, persona_id: str) -> AgentCard:
        response = await self.http.get(f"/a2a/{persona_id}/.well-known/agent-card.json")
        response.raise_for_status()
        return parse_agent_card(response.json())

    async def client(
        self,
        persona_id: str,
        transport: tuple[str, str] = ("JSONRPC", "1.0"),
        *,
        streaming: bool = False,
        http: httpx.AsyncClient | None = None,
    ) -> Client:
        """A real a2a-sdk client bound to one binding and protocol version of the card;
        ``http``: its own HTTP client (with a caller's credentials, say)."""
        binding, version = transport
        card = await self.card(persona_id)
        chosen = [
            i
            for i in card.supported_interfaces
            if i.protocol_binding == binding and i.protocol_version == version
        ]
        assert chosen, f"card offers no {binding} {version} interface"
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(chosen)
        config = ClientConfig(
            httpx_client=http or self.http,
            grpc_channel_factory=grpc.aio.insecure_channel,  # ("GRPC", "1.0"): a hub with gRPC
            supported_protocol_bindings=[binding],
            streaming=streaming,
        )
        return ClientFactory(config).create(card)


HubFactory = Callable[..., AbstractAsyncContextManager[Hub]]


@asynccontextmanager
async def serving(app: FastAPI, sock: socket.socket) -> AsyncIterator[None]:
    """Run ``app`` under a real uvicorn on ``sock``, in this event loop, lifespan included."""
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(STARTUP):  # start-up done: the lifespan ran, the hub is ready
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped during start-up")
            await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        async with asyncio.timeout(60):  # a safety bound: the hub stops once its tasks end
            await task


def loopback_socket() -> tuple[socket.socket, str]:
    """A socket bound to a free port of 127.0.0.1 for a hub to serve on, and its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def settings_of(**values: Any) -> Settings:
    """Settings made of ``values`` alone: none of the developer's ``PERSONA_AGENT_*`` or
    ``OPENAI_*`` variables and no ``.env`` (for hubs a fixture shares beyond one test)."""
    with pytest.MonkeyPatch.context() as env:
        for name in list(os.environ):
            if name.startswith(("PERSONA_AGENT_", "OPENAI_")):
                env.delenv(name)
        return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture
def hub_factory(
    tmp_path: Path,
    personas_dir: Path,
    llm: FakeLLM,
    mcp_config_file: Path | None,
    migrated_sqlite: SqliteTemplate,
) -> HubFactory:
    """Start a hub on a real uvicorn on 127.0.0.1; call again to "restart" it on the same data.
    A new SQLite data directory starts with the worker's migrated database file (the hub
    finds it at the newest revision: tests/migrated.py)."""

    @asynccontextmanager
    async def start(**overrides: Any) -> AsyncIterator[Hub]:
        sock, base_url = loopback_socket()
        values: dict[str, Any] = {
            "personas_dir": personas_dir,
            "data_dir": tmp_path / "data",
            "public_base_url": base_url,
            "llm_base_url": llm.base_url,
            "llm_api_key": "test-key",
            "llm_max_retries": 0,
            "llm_timeout": 10,
            "mcp_config": mcp_config_file,
            "tool_timeout": 5,
            "shutdown_grace_seconds": 2,  # a test that ends mid-task need not wait long
            # ListTasks over every task of a persona, as the protocol's tests need it; the
            # default (only a named context's tasks) is tested in tests/security.
            "task_listing": "all",
        }
        values.update(overrides)
        settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
        migrated_sqlite.under(settings)
        app = create_app(settings)
        async with (
            serving(app, sock),
            httpx.AsyncClient(base_url=base_url, timeout=30) as http,
        ):
            yield Hub(app, http, settings)

    return start


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:
    async with hub_factory() as running:
        yield running
