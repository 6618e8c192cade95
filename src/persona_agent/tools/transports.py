"""How the hub opens an MCP server's streams: a stdio process or streamable HTTP, each
watched for its end.

:func:`transport` opens what a server's configuration names: its command as a stdio
process, or its URL over streamable HTTP, whose requests carry the W3C trace context in
their headers too when tracing is on. :func:`watched` wraps a transport so that the
end of its read stream (the process exited, the connection closed) is reported: the
supervisor (:mod:`persona_agent.tools.supervisor`) then reopens the connection at the next
call.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Self

import anyio
import httpx2

# The SDK's stream typing: the wrapper below must satisfy the same protocols.
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from persona_agent.observe.tracing import active as tracing_active
from persona_agent.tools.config import ServerConfig

__all__ = ["transport", "watched"]

_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def transport(config: ServerConfig) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
    """The streams to the server ``config`` names: its command's stdio, or its URL."""
    if config.command is not None:
        parameters = StdioServerParameters(
            command=config.command, args=config.args, env=config.env or None, cwd=config.cwd
        )
        return stdio_client(parameters)
    assert config.url is not None
    return _http_transport(config.url, config.headers)


@asynccontextmanager
async def _http_transport(url: str, headers: Mapping[str, str]) -> AsyncIterator[TransportStreams]:
    hooks = {"request": [_trace_header]} if tracing_active() else {}
    async with (
        httpx2.AsyncClient(headers=dict(headers), timeout=_HTTP_TIMEOUT, event_hooks=hooks) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


async def _trace_header(request: httpx2.Request) -> None:
    """Traced: the W3C trace context that the MCP SDK puts in a request's ``params._meta``
    (SEP-414, what MCP servers read) goes in its HTTP headers too, for what sits between
    (proxies, a server's HTTP instrumentation)."""
    if request.method != "POST" or b'"traceparent"' not in request.content:
        return
    try:
        message = json.loads(request.content)
    except ValueError:
        return
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict):
        for name in ("traceparent", "tracestate"):
            if isinstance(meta.get(name), str):
                request.headers[name] = meta[name]


@asynccontextmanager
async def watched(
    transport: contextlib.AbstractAsyncContextManager[TransportStreams],
    on_end: Callable[[], None],
) -> AsyncIterator[TransportStreams]:
    """``transport``, calling ``on_end`` when its read stream ends (the server went away)."""
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_end), write_stream


class _WatchedReadStream:
    """A transport's read stream that reports its end."""

    def __init__(
        self, inner: ReadStream[SessionMessage | Exception], on_end: Callable[[], None]
    ) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> object:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)
