"""One MCP server's supervisor: its connection (reopened when it ends), its tools, its calls.

Each server has one long-lived asyncio task that owns its connection (the SDK's
``Client``, whose anyio task groups must be entered and left in the same task):
it opens the session, lists the tools, signals ready, keeps the tool list fresh
and closes the session when asked or when the server goes away. Calls are made
from the callers' own tasks on the shared session, so one server serves many
calls at once, and cancelling a caller abandons only its call (the SDK tells
the server with ``notifications/cancelled``).

A connection that ends (a stdio process exits, an HTTP transport fails) is
reopened by the next call to that server, which then goes to the new one. A
call that was in flight when the connection ended is not retried: the tool may
have run, or may be what ended the server. The streams a connection runs on, and how
their end is noticed, are :mod:`persona_agent.tools.transports`'.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from mcp.client import Client, IncomingMessage
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError

from persona_agent import __version__
from persona_agent.errors import ToolError
from persona_agent.tools.config import ServerConfig
from persona_agent.tools.tool_specs import MAX_TOOL_NAME, SEPARATOR, ToolInfo
from persona_agent.tools.transports import transport, watched

__all__ = ["Supervisor"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_PAGES = 100
_CLOSE_TIMEOUT = 10.0
_RELISTEN_DELAY = 1.0
_CLOSED = "closed"
_CLIENT_INFO = types.Implementation(name="persona-agent", version=__version__)


class _StartError(Exception):
    """A server could not be started; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(eq=False)
class _Connection:
    """One session with a server, from ready until it ends."""

    client: Client | None = None
    lost: str | None = None
    """Why the connection ended; ``None`` while it is up."""
    ending: asyncio.Event = field(default_factory=asyncio.Event)
    tools_changed: asyncio.Event = field(default_factory=asyncio.Event)

    def lose(self, reason: str) -> bool:
        """Mark the connection ended (first reason wins); whether this was news."""
        news = self.lost is None
        if news:
            self.lost = reason
        self.ending.set()
        return news


class Supervisor:
    """One configured server: its connection (reopened when it ends), tools and calls."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        timeout: float,
        connect_timeout: float,
        on_tools_changed: Callable[[str], None] | None,
    ) -> None:
        self.name = name
        self.config = config
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.tools: dict[str, ToolInfo] = {}
        self._on_tools_changed = on_tools_changed
        self._current: asyncio.Future[_Connection] | None = None
        self._current_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._launches = 0
        self._closed = False

    @property
    def status(self) -> str:
        current = self._current
        if self._closed:
            return "closed"
        if current is None:
            return "not started"
        if not current.done():
            return "starting"
        error = current.exception()
        if error is not None:
            return f"failed: {error}"
        lost = current.result().lost
        return "running" if lost is None else f"stopped: {lost}"

    async def start(self) -> None:
        try:
            await asyncio.shield(self._connect())
        except _StartError as error:
            logger.warning("MCP server %r did not start, skipping it: %s", self.name, error.reason)
            return
        logger.info(
            "MCP server %r (%s) started with %d tool(s): %s",
            self.name,
            self.config.transport,
            len(self.tools),
            ", ".join(self.tools) or "none",
        )

    async def call(self, tool: ToolInfo, arguments: Mapping[str, Any]) -> types.CallToolResult:
        try:
            connection = await asyncio.shield(self._connect())
        except _StartError as error:
            raise ToolError(
                f"Tool '{tool.name}' is unavailable: server '{self.name}' could not be started"
            ) from error
        client = connection.client
        assert client is not None  # set before the connection is ready
        try:
            async with asyncio.timeout(self.timeout):
                return await client.call_tool(tool.remote_name, dict(arguments))
        except TimeoutError:
            logger.warning("MCP tool %s timed out after %gs", tool.name, self.timeout)
            raise ToolError(f"Tool '{tool.name}' timed out after {self.timeout:g}s") from None
        except MCPError as error:
            if error.code == types.CONNECTION_CLOSED or connection.lost is not None:
                connection.lose("the connection closed")
                logger.warning("MCP server %r stopped during a call of %s", self.name, tool.name)
                raise ToolError(
                    f"Tool '{tool.name}' failed: server '{self.name}' stopped during the call"
                ) from None
            logger.warning("MCP tool %s failed: %s", tool.name, error)
            raise ToolError(f"Tool '{tool.name}' failed: {_shorten(error.error.message)}") from None
        except Exception:
            logger.warning(
                "MCP tool %s: unexpected answer from %r", tool.name, self.name, exc_info=True
            )
            raise ToolError(
                f"Tool '{tool.name}' failed: unexpected answer from server '{self.name}'"
            ) from None

    async def aclose(self) -> None:
        self._closed = True
        current = self._current
        if current is not None and current.done() and current.exception() is None:
            current.result().lose(_CLOSED)
        elif current is not None and self._current_task is not None:
            self._current_task.cancel()  # still starting: give up at once
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=_CLOSE_TIMEOUT)
            for task in pending:
                logger.warning("MCP server %r did not close in time; cancelling it", self.name)
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=_CLOSE_TIMEOUT)

    def _connect(self) -> asyncio.Future[_Connection]:
        """The live connection, or the one being opened: (re)starts the server when needed."""
        current = self._current
        if current is not None:
            if not current.done():
                return current
            error = current.exception()
            if error is None and current.result().lost is None:
                return current
            if error is None:
                logger.warning(
                    "MCP server %r stopped (%s); restarting it", self.name, current.result().lost
                )
            else:
                logger.warning("MCP server %r is unavailable (%s); retrying", self.name, error)
        if self._closed:
            raise ToolError(f"The tools of server '{self.name}' are closed")
        ready: asyncio.Future[_Connection] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(_retrieve)
        self._launches += 1
        task = asyncio.create_task(self._run(ready), name=f"mcp-server-{self.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._current, self._current_task = ready, task
        return ready

    async def _run(self, ready: asyncio.Future[_Connection]) -> None:
        """Own one connection: open it, serve until it ends or is closed, close it."""
        connection = _Connection()
        try:
            async with AsyncExitStack() as stack:
                async with asyncio.timeout(self.connect_timeout):
                    client = await stack.enter_async_context(self._client(connection))
                    tools = await self._list_tools(client)
                connection.client = client
                self._set_tools(ready, tools, refreshed=False)
                ready.set_result(connection)
                if self._launches > 1:
                    logger.info("MCP server %r restarted", self.name)
                await self._serve(ready, connection)
        except Exception as error:
            # Prefer what the transport saw ("the server process exited") to its echo.
            reason = connection.lost or _describe(error, self.connect_timeout)
            if not ready.done():
                ready.set_exception(_StartError(reason))
            elif connection.lose(reason):
                logger.warning("MCP server %r: connection lost: %s", self.name, reason)
        finally:
            if not ready.done():
                ready.set_exception(_StartError("closed before it was ready"))
            connection.lose(_CLOSED)

    def _client(self, connection: _Connection) -> Client:
        async def on_message(message: IncomingMessage) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                connection.tools_changed.set()

        def on_end() -> None:
            reason = "the server process exited" if self.config.command else "the connection closed"
            if connection.lose(reason) and connection.client is not None:  # not our own close
                logger.warning("MCP server %r: %s", self.name, reason)

        return Client(
            watched(transport(self.config), on_end),
            message_handler=on_message,
            client_info=_CLIENT_INFO,
            cache=None,
        )

    async def _serve(self, ready: asyncio.Future[_Connection], connection: _Connection) -> None:
        """Keep the tool list fresh until the connection ends."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._refresh_tools, ready, connection)
            group.start_soon(self._listen, connection)
            await connection.ending.wait()
            group.cancel_scope.cancel()

    async def _refresh_tools(
        self, ready: asyncio.Future[_Connection], connection: _Connection
    ) -> None:
        assert connection.client is not None
        while True:
            await connection.tools_changed.wait()
            connection.tools_changed.clear()
            try:
                with anyio.fail_after(self.connect_timeout):
                    tools = await self._list_tools(connection.client)
            except Exception as error:
                logger.warning(
                    "MCP server %r: cannot refresh its tools: %s",
                    self.name,
                    _describe(error, self.connect_timeout),
                )
                continue
            self._set_tools(ready, tools, refreshed=True)

    async def _listen(self, connection: _Connection) -> None:
        """On 2026-07-28 connections, ask for ``list_changed`` events (``subscriptions/listen``);
        earlier servers send ``notifications/tools/list_changed`` unasked."""
        client = connection.client
        assert client is not None
        capability = client.server_capabilities.tools
        if capability is None or not capability.list_changed:
            return
        while True:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    if not subscription.honored.tools_list_changed:
                        return
                    async for _event in subscription:
                        connection.tools_changed.set()
            except ListenNotSupportedError:
                return
            except SubscriptionLost:
                pass
            except MCPError as error:
                if error.code != types.CONNECTION_CLOSED:
                    logger.info("MCP server %r: no tool list events: %s", self.name, error)
                return
            # The stream ended; events are not replayed: listen again and refetch.
            await anyio.sleep(_RELISTEN_DELAY)
            connection.tools_changed.set()

    async def _list_tools(self, client: Client) -> dict[str, ToolInfo]:
        tools: dict[str, ToolInfo] = {}
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                info = self._tool_info(tool)
                if info is None:
                    continue
                if info.name in tools:
                    logger.warning(
                        "MCP server %r: tool %r clashes with another as %r; skipped",
                        self.name,
                        tool.name,
                        info.name,
                    )
                    continue
                tools[info.name] = info
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    def _tool_info(self, tool: types.Tool) -> ToolInfo | None:
        name = f"{self.name}{SEPARATOR}{_UNSAFE.sub('_', tool.name)}"
        if len(name) > MAX_TOOL_NAME:
            logger.warning(
                "MCP server %r: tool %r skipped: %r is longer than %d characters",
                self.name,
                tool.name,
                name,
                MAX_TOOL_NAME,
            )
            return None
        return ToolInfo(
            name=name,
            server=self.name,
            description=tool.description or tool.title or "",
            input_schema=dict(tool.input_schema),
            tool=tool.name,
        )

    def _set_tools(
        self, ready: asyncio.Future[_Connection], tools: dict[str, ToolInfo], *, refreshed: bool
    ) -> None:
        """Adopt the tool list of the current connection (after a start, restart or refresh)."""
        if ready is not self._current:
            return  # an older connection, already replaced
        changed = tools != self.tools
        self.tools = tools
        if refreshed:
            logger.info("MCP server %r: tool list refreshed (%d tools)", self.name, len(tools))
        first_start = self._launches == 1 and not refreshed
        if changed and not first_start and self._on_tools_changed is not None:
            self._on_tools_changed(self.name)


def _retrieve(future: asyncio.Future[_Connection]) -> None:
    """Mark a start failure as seen: it is reported through ``status`` and the log."""
    if not future.cancelled():
        future.exception()


def _describe(error: BaseException, connect_timeout: float) -> str:
    """A short, single-line reason for a failure (the first leaf of an exception group)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return f"no answer within {connect_timeout:g}s"
    if isinstance(error, MCPError):
        return _shorten(error.error.message)
    text = str(error).strip()
    return _shorten(f"{type(error).__name__}: {text}" if text else type(error).__name__)


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
