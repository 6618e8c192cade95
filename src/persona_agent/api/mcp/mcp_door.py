"""``/mcp``'s door: the MCP server (:mod:`.mcp_server`) built and started on its first use.

The ``mcp`` SDK's server side loads far more than the hub's own MCP client (``cryptography``
among it, which a hub at its defaults does not otherwise load: tests/test_lean_imports.py),
so a hub nobody asks over MCP never imports it. The first request to ``/mcp`` (or
``persona-agent mcp``) builds the server and starts its session manager in a task of the
app's lifespan, which stops it at shutdown.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from persona_agent.a2a.registry import A2ARegistry
from persona_agent.personas.stores.store import PersonaStore

if TYPE_CHECKING:
    from persona_agent.api.mcp.mcp_server import McpPersonas

__all__ = ["MCP_PATH", "McpDoor"]

MCP_PATH = "/mcp"
START_TIMEOUT = 30.0
"""Seconds the first request waits for the MCP server to start."""


class McpDoor:
    """The MCP server of the hub, started on first use; an ASGI app (``/mcp``) and a part of
    the app's lifespan (``running()``). ``options``: :class:`.mcp_server.McpPersonas`'s."""

    def __init__(self, registry: A2ARegistry, store: PersonaStore, **options: Any) -> None:
        self._registry = registry
        self._store = store
        self._options = options
        self._wanted = asyncio.Event()
        self._stop = asyncio.Event()
        self._started: asyncio.Future[McpPersonas] | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        self._started = asyncio.get_running_loop().create_future()
        serving = asyncio.create_task(self._serve_when_asked(self._started))
        try:
            yield
        finally:
            self._stop.set()
            self._wanted.set()
            await serving

    async def _serve_when_asked(self, started: asyncio.Future[McpPersonas]) -> None:
        await self._wanted.wait()
        if self._stop.is_set():
            started.cancel()
            return
        try:
            from persona_agent.api.mcp.mcp_server import McpPersonas

            personas = McpPersonas(self._registry, store=self._store, **self._options)
            async with personas.running():
                started.set_result(personas)
                await self._stop.wait()
        except Exception as error:
            if not started.done():
                started.set_exception(error)
            raise

    async def server(self) -> McpPersonas:
        """The MCP server, started if it was not.

        Raises:
            RuntimeError: the app's lifespan is not running.
        """
        if self._started is None or self._stop.is_set():
            raise RuntimeError("the hub is not running: the MCP server starts in its lifespan")
        self._wanted.set()
        async with asyncio.timeout(START_TIMEOUT):
            return await asyncio.shield(self._started)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        personas = await self.server()
        await personas(scope, receive, send)
