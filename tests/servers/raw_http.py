"""A raw HTTP/1.1 server in the test's own event loop, for hostile answers no framework
gives: a body streamed for ever, a head that promises 300 MB, an answer that never comes.
It records every request (path and headers), the bytes each answer got out, and whether
the client hung up before the answer was done.

    async with RawHttp() as server:
        server.json("/catalog.json", {...})
        server.stream("/huge.json", chunks)          # chunked, from an iterator
        server.hang("/slow.json")                   # until server.release.set()
        ... server.base_url ..., server.requests, server.answers["/huge.json"].sent
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

__all__ = ["Answer", "RawHttp", "Request"]


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    """By lower-case name."""


@dataclass
class Answer:
    """What one path's answers did."""

    sent: int = 0
    """Bytes written and drained, heads included."""
    cut: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the client hung up before an answer was done."""
    done: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when an answer was written to its end."""


_Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Answer], Awaitable[None]]


class RawHttp:
    """See the module docstring."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.answers: dict[str, Answer] = {}
        self.release = asyncio.Event()
        """Lets the answers of :meth:`hang` go."""
        self.asked = asyncio.Event()
        """Set at the first request."""
        self._routes: dict[str, _Handler] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release.set()
        assert self._server is not None
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    def json(self, path: str, document: Any, *, status: int = 200) -> None:
        """``document`` as JSON, with its ``Content-Length``."""
        self.body(path, json.dumps(document).encode(), status=status)

    def body(self, path: str, body: bytes, *, status: int = 200) -> None:
        async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, a: Answer) -> None:
            head = _head(status, {"Content-Length": str(len(body))})
            await _send(w, a, head + body)

        self._route(path, answer)

    def stream(
        self, path: str, chunks: Iterable[bytes], *, content_length: int | None = None
    ) -> None:
        """The chunks one by one (chunked, unless ``content_length`` is declared), each
        drained before the next: what the client does not read is not sent."""

        async def answer(_r: asyncio.StreamReader, w: asyncio.StreamWriter, a: Answer) -> None:
            declared = content_length is not None
            headers = {"Content-Length": str(content_length)} if declared else {}
            if not declared:
                headers["Transfer-Encoding"] = "chunked"
            await _send(w, a, _head(200, headers))
            for chunk in chunks:
                framed = chunk if declared else b"%x\r\n%s\r\n" % (len(chunk), chunk)
                await _send(w, a, framed)
            if not declared:
                await _send(w, a, b"0\r\n\r\n")

        self._route(path, answer)

    def hang(self, path: str, then: Any) -> None:
        """No answer until :attr:`release` is set, then ``then`` as JSON; a client that
        hangs up meanwhile is seen (:attr:`Answer.cut`)."""
        body = json.dumps(then).encode()

        async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, a: Answer) -> None:
            hung_up = asyncio.ensure_future(r.read(1))  # b"": the client closed
            released = asyncio.ensure_future(self.release.wait())
            await asyncio.wait({hung_up, released}, return_when=asyncio.FIRST_COMPLETED)
            released.cancel()
            if hung_up.done():
                raise ConnectionResetError("the client hung up")
            hung_up.cancel()
            await _send(w, a, _head(200, {"Content-Length": str(len(body))}) + body)

        self._route(path, answer)

    def _route(self, path: str, handler: _Handler) -> None:
        self._routes[path] = handler
        self.answers[path] = Answer()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._one(reader, writer)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        line, *fields = head.decode("latin-1").split("\r\n")
        path = line.split(" ")[1]
        headers = {}
        for item in fields:
            if ":" in item:
                name, value = item.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        self.requests.append(Request(path, headers))
        self.asked.set()
        handler = self._routes.get(path)
        if handler is None:
            await _send(writer, Answer(), _head(404, {"Content-Length": "0"}))
            return
        answer = self.answers[path]
        try:
            await handler(reader, writer, answer)
        except ConnectionError:
            answer.cut.set()
            return
        answer.done.set()


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} X", "Content-Type: application/json", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _send(writer: asyncio.StreamWriter, answer: Answer, data: bytes) -> None:
    writer.write(data)
    await writer.drain()
    answer.sent += len(data)
