"""``/mcp``'s handshake-era sessions held to the caller that opened each: how many a caller
and the hub keep open, how long one lives, and who may use one (docs/mcp.md#sessions).

The ``mcp`` SDK's session manager keeps a session for each ``initialize`` until its
client deletes it or it has had no HTTP request in flight for its idle timeout (an open
GET stream or a ping every few minutes keeps it forever), up to 10,000 sessions, and
binds a session to its creator only through the SDK's own OAuth user, which the hub does
not use. In front of it, :class:`McpSessions`:

- binds each session to the caller that opened it (an API key's or a token's principal,
  else the client's address, as the rate limits count callers): a request naming another
  caller's session is answered 404 ``Session not found``, as for an unknown id, and never
  reaches the session (a DELETE included);
- keeps at most ``per_caller`` sessions a caller: one more closes that caller's least
  recently used session with no call in flight, or is refused 429 when each has one;
  and at most ``total`` sessions in all: one more is refused 503;
- closes a session with no tool or list call for ``idle_timeout`` seconds (pings and
  open streams are no use of it), and any session ``max_age`` seconds old, once no call
  of it is in flight.

A session is closed through the SDK's own door, a DELETE with its id as its client
would send. Requests of the 2026-07-28 era carry no session and pass untouched; so does
every request to a stateless session manager.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

__all__ = ["McpSessions", "handshake_era"]

logger = logging.getLogger(__name__)

_SESSION_HEADER = MCP_SESSION_ID_HEADER.encode("ascii")
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
RETRY_AFTER = 30
"""Seconds a client refused for the hub's session limit is told to wait."""
SWEEP_MIN, SWEEP_MAX = 0.05, 30.0
"""Bounds of the seconds between two looks for idle and old sessions (an eighth of the
shorter of the idle timeout and the age limit)."""


@dataclass(slots=True)
class _Session:
    owner: str
    opened: float
    used: float
    calls: int = 0
    """Tool and list calls of the session in flight."""


class McpSessions:
    """The sessions of ``manager`` by caller: see the module. ``on_close``: told the id of
    each session that ends (its client's DELETE, or closed here: the caller's, idle, or
    old); ``on_refuse``: told the caller, the status and the message of each session
    refused."""

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        *,
        per_caller: int,
        total: int,
        idle_timeout: float,
        max_age: float,
        on_close: Callable[[str], None] = lambda _session_id: None,
        on_refuse: Callable[[str, int, str], None] = lambda _caller, _status, _message: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._manager = manager
        self._per_caller = per_caller
        self._total = total
        self._idle_timeout = idle_timeout
        self._max_age = max_age
        self._on_close = on_close
        self._on_refuse = on_refuse
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._opening: Counter[str] = Counter()
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._sessions)

    # -- requests ----------------------------------------------------------

    async def handle(self, caller: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve a request of ``caller`` (:meth:`Admission.check`'s key) to ``/mcp``."""
        if self._manager.stateless or not handshake_era(scope):
            await self._manager.handle_request(scope, receive, send)
            return
        session_id = _header(scope, _SESSION_HEADER)
        if session_id is None:
            await self._open(caller, scope, receive, send)
            return
        session = self._sessions.get(session_id)
        if session is None or session.owner != caller:
            # Another caller's session is answered as one that does not exist.
            await _error(404, INVALID_REQUEST, "Session not found")(scope, receive, send)
            return
        ended = scope.get("method") == "DELETE"  # its client ends it

        async def answered(message: Message) -> None:
            nonlocal ended
            if message["type"] == "http.response.start" and message["status"] == 404:
                ended = True  # the SDK had ended it (a crash, its own timeout)
            await send(message)

        try:
            await self._manager.handle_request(scope, receive, answered)
        finally:
            if ended:
                self._sessions.pop(session_id, None)
                self._on_close(session_id)

    @contextmanager
    def working(self, session_id: str | None) -> Iterator[None]:
        """A tool or list call of the session ``session_id`` is in flight: it is used now,
        and not closed for idleness or age meanwhile (``None`` or an id of no session:
        stdio, the 2026-07-28 era)."""
        session = self._sessions.get(session_id) if session_id else None
        if session is None:
            yield
            return
        session.used = self._clock()
        session.calls += 1
        try:
            yield
        finally:
            session.calls -= 1
            session.used = self._clock()

    async def _open(self, caller: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A request with no session id: the SDK opens a session for it (kept if its
        answer is a success), within the caller's and the hub's limits."""
        mine = [
            (key, session) for key, session in self._sessions.items() if session.owner == caller
        ]
        if len(mine) + self._opening[caller] >= self._per_caller:
            idle = [(session.used, key) for key, session in mine if not session.calls]
            if not idle:
                message = (
                    f"Too many MCP sessions open for this caller ({self._per_caller}, each "
                    "with a call in flight: PERSONA_AGENT_MCP_SESSIONS_PER_CALLER); end one "
                    "(DELETE /mcp with its Mcp-Session-Id) or wait for a call to end"
                )
                self._on_refuse(caller, 429, message)
                await _error(429, INTERNAL_ERROR, message)(scope, receive, send)
                return
            self._close(min(idle)[1], "the caller opened one more")
        elif len(self._sessions) + self._opening.total() >= self._total:
            message = (
                f"The hub has {self._total} MCP sessions open, its most "
                "(PERSONA_AGENT_MCP_SESSIONS_MAX); try again later"
            )
            headers = {"Retry-After": str(RETRY_AFTER)}
            self._on_refuse(caller, 503, message)
            await _error(503, INTERNAL_ERROR, message, headers)(scope, receive, send)
            return

        async def opened(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                session_id = _header(message, _SESSION_HEADER)
                if session_id is not None:
                    now = self._clock()
                    self._sessions[session_id] = _Session(caller, now, now)
            await send(message)

        self._opening[caller] += 1
        try:
            await self._manager.handle_request(scope, receive, opened)
        finally:
            self._opening[caller] -= 1
            if not self._opening[caller]:
                del self._opening[caller]

    # -- closing -----------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Close idle and old sessions while the session manager runs (enter this inside
        the manager's ``run()``)."""
        sweeping = asyncio.create_task(self._sweep())
        try:
            yield
        finally:
            sweeping.cancel()
            with suppress(asyncio.CancelledError):
                await sweeping
            if self._closing:
                await asyncio.wait(list(self._closing), timeout=5)

    async def _sweep(self) -> None:
        pause = min(max(min(self._idle_timeout, self._max_age) / 8, SWEEP_MIN), SWEEP_MAX)
        while True:
            await asyncio.sleep(pause)
            self.sweep()

    def sweep(self) -> None:
        """Close every session idle for the idle timeout or older than the age limit,
        with no call in flight."""
        now = self._clock()
        for key, session in list(self._sessions.items()):
            if session.calls:
                continue
            if now - session.used >= self._idle_timeout:
                self._close(key, "idle")
            elif now - session.opened >= self._max_age:
                self._close(key, "at its age limit")

    def _close(self, session_id: str, why: str) -> None:
        """Forget the session now (its id answers 404 from here on) and have the SDK end
        it, in a task of its own."""
        self._sessions.pop(session_id, None)
        self._on_close(session_id)
        logger.debug("closing an MCP session (%s)", why)
        task = asyncio.create_task(self._delete(session_id))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _delete(self, session_id: str) -> None:
        """The SDK ends the session as on its client's DELETE (its streams closed, its
        server task ended, its id forgotten)."""
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": "",
            "query_string": b"",
            "headers": [(_SESSION_HEADER, session_id.encode("ascii"))],
            "client": None,
            "server": None,
        }
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(_message: Message) -> None:
            return None

        try:
            await self._manager.handle_request(scope, receive, discard)
        except Exception:  # the manager is stopping: the session ends with it
            logger.debug("an MCP session could not be closed", exc_info=True)


def handshake_era(scope: Scope) -> bool:
    """Whether the SDK serves the request on its session path (no protocol version
    header, or one of the ``initialize`` handshake's), as its manager decides."""
    version = _header(scope, _VERSION_HEADER)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def _header(scope: Scope | Message, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _error(
    status: int, code: int, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    """A JSON-RPC error with no request id, as the SDK's manager answers its own."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)
