"""The MCP toolbox: every configured MCP server, connected once and shared by all personas.

Each server is run by its :class:`~persona_agent.tools.supervisor.Supervisor`; the
toolbox puts their tools under one namespace (``server__tool``), applies a
persona's allow-list and routes each call to its server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from opentelemetry.trace import StatusCode

from persona_agent.errors import ToolError
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.observe.tracing import TRACER
from persona_agent.tools.config import MCPConfig
from persona_agent.tools.supervisor import Supervisor
from persona_agent.tools.tool_specs import SEPARATOR, ToolInfo, render_result

__all__ = ["MCPToolbox"]


class MCPToolbox:
    """The tools of every configured MCP server, under one namespace.

    ``start()`` connects to every server (concurrently); one that fails is
    logged and skipped. ``call()`` may run concurrently from many tasks, for
    one server or several; cancelling a caller abandons its call at once
    (``CancelledError`` propagates) and leaves the toolbox usable.
    ``aclose()`` closes every session and stops every process.

    Each call is a span (``execute_tool {name}``: server, tool, outcome), parent of the
    MCP SDK's request span; with ``metrics``, calls are counted by server, tool and
    outcome.
    """

    def __init__(
        self,
        config: MCPConfig,
        *,
        default_timeout: float = 30.0,
        connect_timeout: float = 30.0,
        on_tools_changed: Callable[[str], None] | None = None,
        metrics: HubMetrics = NO_METRICS,
    ) -> None:
        """``default_timeout``: per-call timeout of servers that set none.
        ``connect_timeout``: bound on starting a server and listing its tools.
        ``on_tools_changed(server)``: called after a server's tool list was refreshed."""
        self.metrics = metrics
        self._servers = {
            name: Supervisor(
                name,
                server_config,
                timeout=server_config.timeout or default_timeout,
                connect_timeout=connect_timeout,
                on_tools_changed=on_tools_changed,
            )
            for name, server_config in config.servers.items()
        }
        self._started = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect to every server and list its tools. Never raises for a server that fails."""
        if self._started:
            return
        self._started = True
        await asyncio.gather(*(server.start() for server in self._servers.values()))

    async def aclose(self) -> None:
        """Close every session and stop every server process. Idempotent."""
        await asyncio.gather(*(server.aclose() for server in self._servers.values()))

    @property
    def servers(self) -> dict[str, str]:
        """Server name → status: ``running``, ``starting``, ``failed: why``,
        ``stopped: why`` (restarted by the next call), ``closed`` or ``not started``."""
        return {name: server.status for name, server in self._servers.items()}

    def tools(self, allow: Sequence[str] | None = None) -> list[ToolInfo]:
        """The tools ``allow`` permits (``None``: all), in server then tool order."""
        return [
            tool
            for server in self._servers.values()
            for tool in server.tools.values()
            if self.is_allowed(tool.name, allow)
        ]

    def tool_specs(self, allow: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The permitted tools in the OpenAI ``tools`` format."""
        return [tool.openai_spec() for tool in self.tools(allow)]

    def is_allowed(self, name: str, allow: Sequence[str] | None) -> bool:
        """Whether ``allow`` (``server`` or ``server__tool`` entries; ``None``: all) permits it."""
        if allow is None:
            return True
        server = name.partition(SEPARATOR)[0]
        return name in allow or server in allow

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        allow: Sequence[str] | None = None,
    ) -> str:
        """Call the tool ``name`` (``server__tool``) and return its result as text.

        A result the tool marks as an error is returned, not raised, as
        ``"Error: ..."``, so the model can read it.

        Raises:
            ToolError: the tool is not allowed or unknown, timed out, its server
                is unavailable or failed (a short message, safe for clients).
            asyncio.CancelledError: the caller was cancelled; the call is abandoned.
        """
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
        with TRACER.start_as_current_span(f"execute_tool {name}", attributes=attributes) as span:
            if not self.is_allowed(name, allow):
                raise ToolError(f"Tool '{name}' is not allowed for this persona")
            server = self._servers.get(name.partition(SEPARATOR)[0])
            tool = server.tools.get(name) if server is not None else None
            if server is None or tool is None:
                raise ToolError(f"Unknown tool '{name}'")
            span.set_attribute("mcp.server", tool.server)
            span.set_attribute("mcp.tool", tool.remote_name)
            outcome = "canceled"  # unless it ends otherwise
            try:
                result = await server.call(tool, arguments)
                outcome = "tool_error" if result.is_error else "ok"
            except Exception:
                outcome = "error"
                raise
            finally:
                span.set_attribute("persona_agent.tool.outcome", outcome)
                if outcome == "tool_error":
                    span.set_status(StatusCode.ERROR, "the tool returned an error")
                self.metrics.mcp_calls.labels(tool.server, tool.remote_name, outcome).inc()
            return render_result(result)
