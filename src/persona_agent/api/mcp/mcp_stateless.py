"""``/mcp`` with no session a replica holds: handshake-era clients served by any replica,
and their cancels reaching the replica that runs the call (docs/mcp.md#replicas).

With its session manager stateless, the ``mcp`` SDK answers each request on its own: an
``initialize`` opens nothing and its answer names no ``Mcp-Session-Id``, so the next
request may go to any replica. Two things a session gave are kept here:

- **Cancels.** A handshake-era client cancels a call with a ``notifications/cancelled``
  POST of its own (it keeps the call's POST open: "the frame is the signal"). That POST
  may reach another replica than the call's, and even on the same one the SDK serves it
  with a fresh dispatcher that knows no call. :class:`StatelessFront` takes it before
  the SDK: the call of that caller, client and request id is canceled here
  (:class:`CallsInFlight`) or, on replicas, announced on the cluster's ``mcp_cancel``
  channel to the replica that runs it.
- **Which client.** So that one client's cancel never reaches another's call with the
  same request id (two desktop clients of one key, or anonymous clients behind one
  address, all count ids from 0), the answer to an ``initialize`` carries an
  ``Mcp-Session-Id`` the hub makes up: a client label, not a session. Any replica
  accepts it, and it never grants anything: a cancel acts on the calls of its own
  caller only. The GET stream a session would have is refused (405, as the
  specification allows: the client then goes without it), and so is a ``DELETE``'s
  nothing to end (204).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from persona_agent.cluster import Cluster

__all__ = [
    "CANCEL_CHANNEL",
    "CallKey",
    "CallsInFlight",
    "StatelessFront",
    "call_key",
    "cancel_key",
    "client_label",
    "listen_for_cancels",
]

logger = logging.getLogger(__name__)

CANCEL_CHANNEL = "persona_agent_mcp_cancel"
"""The cluster channel a replica announces a handshake-era cancel on."""
CALLER_SCOPE_KEY = "persona_agent.mcp_caller"
"""Where :class:`StatelessFront` leaves the caller in a request's ASGI scope."""
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("ascii")
REMEMBERED = 1000
"""Cancels of calls that run nowhere (yet) kept at most."""
_MAX_ID = 200
"""Characters of a request id or client label kept (longer ones are cut)."""

CallKey = tuple[str, str, str]
"""A call in flight: its caller, its client's label, its JSON-RPC request id (as JSON)."""

Announce = Callable[[str, str], Awaitable[None]]
"""Notify every replica: ``(channel, payload)`` (:meth:`.Cluster.announce`)."""


def call_key(caller: str, client: str | None, request_id: object) -> CallKey:
    """The key of a call (``request_id`` as JSON: ``1`` and ``"1"`` are two ids)."""
    return (caller, (client or "")[:_MAX_ID], json.dumps(request_id)[:_MAX_ID])


class CallsInFlight:
    """The tool calls running on this replica, by :data:`CallKey`, each cancelable.

    ``announce``: tells every replica (this one too) of a cancel; ``None`` on a hub of
    one process, where a cancel is only looked for here. A cancel of a call that runs
    nowhere yet (it overtook its call on the way to another replica) is kept
    ``remember`` seconds (the latest :data:`REMEMBERED` of them): the call is canceled
    as it starts.
    """

    def __init__(
        self,
        announce: Announce | None = None,
        *,
        remember: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._announce = announce
        self._remember = remember
        self._clock = clock
        self._calls: dict[CallKey, asyncio.Task[Any]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._early: OrderedDict[CallKey, float] = OrderedDict()
        self._canceled: set[asyncio.Task[Any]] = set()
        """Tasks canceled here (a call may end quietly when canceled: still canceled)."""

    def __len__(self) -> int:
        return len(self._calls)

    @contextmanager
    def running(self, key: CallKey | None, task: asyncio.Task[Any]) -> Iterator[None]:
        """``task`` runs the call ``key`` (``None``: a call no cancel names) meanwhile."""
        if key is None or key in self._calls:
            yield
            return
        if self._early.pop(key, None) is not None:
            self._cancel(task)  # its cancel came first
        self._calls[key] = task
        try:
            yield
        finally:
            if self._calls.get(key) is task:
                del self._calls[key]

    async def run(self, call: Awaitable[None], key: CallKey | None) -> bool:
        """Run ``call`` in a task of its own that a cancel naming ``key`` ends: whether
        it ran to its end. Cancelled from outside (the SDK's own cancel, the request
        closed), the task is cancelled too, and winds down on its own."""
        task = asyncio.ensure_future(call)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            with self.running(key, task):
                try:
                    await asyncio.wait({task})
                except asyncio.CancelledError:
                    task.cancel()
                    raise
            if task.cancelled() or task in self._canceled:
                return False
            task.result()
            return True
        finally:
            self._canceled.discard(task)

    async def cancel(self, key: CallKey) -> None:
        """Cancel the call ``key`` wherever it runs (nothing if it runs nowhere)."""
        if self.cancel_here(key) or self._announce is None:
            return
        await self._announce(CANCEL_CHANNEL, json.dumps(list(key)))

    def cancel_here(self, key: CallKey) -> bool:
        """Cancel the call ``key`` if it runs on this replica: whether it does."""
        task = self._calls.pop(key, None)
        if task is None:
            self._keep(key)
            return False
        self._cancel(task)
        return True

    def _cancel(self, task: asyncio.Task[Any]) -> None:
        self._canceled.add(task)
        task.cancel()

    def _keep(self, key: CallKey) -> None:
        """Remember a cancel of no call here (yet), forgetting those too old or too many."""
        now = self._clock()
        self._early[key] = now
        self._early.move_to_end(key)
        while self._early and (
            len(self._early) > REMEMBERED or now - next(iter(self._early.values())) > self._remember
        ):
            self._early.popitem(last=False)

    def announced(self, payload: str) -> None:
        """A replica announced a cancel (:data:`CANCEL_CHANNEL`)."""
        try:
            caller, client, request_id = json.loads(payload)
        except (ValueError, TypeError):
            logger.warning("An MCP cancel announcement that is not one: %.80r", payload)
            return
        self.cancel_here((str(caller), str(client), str(request_id)))


class StatelessFront:
    """In front of a stateless session manager (``app``), for handshake-era requests of
    ``caller``: see the module. ``max_body_bytes``: a larger body is passed on unread,
    for the manager to refuse (413)."""

    def __init__(self, app: ASGIApp, calls: CallsInFlight, *, max_body_bytes: int) -> None:
        self._app = app
        self._calls = calls
        self._max_body = max_body_bytes

    async def handle(self, caller: str, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method")
        if method == "GET":
            await Response(status_code=405, headers={"Allow": "POST, DELETE"})(scope, receive, send)
            return
        if method == "DELETE":
            await Response(status_code=204)(scope, receive, send)
            return
        scope[CALLER_SCOPE_KEY] = caller
        if method != "POST":
            await self._app(scope, receive, send)
            return
        body, more, other = await _read(receive, self._max_body)
        replay = _replay(body, more, other, receive)
        whole = not more and other is None and len(body) <= self._max_body
        message = _small_json(body) if whole else None
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if request_id is not None:
                await self._calls.cancel(call_key(caller, client_label(scope), request_id))
            await Response(status_code=202)(scope, replay, send)
            return
        if isinstance(message, dict) and message.get("method") == "initialize":
            await self._app(scope, replay, _labelled(send, uuid4().hex))
            return
        await self._app(scope, replay, send)


def cancel_key(request: object, request_id: object) -> CallKey | None:
    """What a handshake-era cancel names the call of ``request`` by (``None``: stdio, a
    call in a session, which the SDK cancels itself)."""
    if not isinstance(request, Request) or CALLER_SCOPE_KEY not in request.scope:
        return None
    return call_key(request.scope[CALLER_SCOPE_KEY], client_label(request.scope), request_id)


async def listen_for_cancels(cluster: Cluster, calls: CallsInFlight) -> None:
    """Hear the cancels other replicas announce. The listener keeps the channel even when
    its connection drops meanwhile, and listens on it again as it reconnects."""
    try:
        await cluster.listener.listen(CANCEL_CHANNEL, calls.announced)
    except Exception:
        logger.warning("Listening for MCP cancels waits for the PostgreSQL reconnection")


def client_label(scope: Scope) -> str | None:
    """The client label a request carries (the ``Mcp-Session-Id`` header), if any."""
    for key, value in scope.get("headers") or ():
        if key.lower() == _SESSION_HEADER:
            return bytes(value).decode("latin-1")
    return None


async def _read(receive: Receive, limit: int) -> tuple[bytes, bool, Message | None]:
    """The request body, up to just past ``limit`` bytes: the body, whether more of it
    follows, and a message that came instead of the rest (a disconnect)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body, False, message
        body += message.get("body", b"")
        more = bool(message.get("more_body", False))
        if not more or len(body) > limit:
            return body, more, None


def _replay(body: bytes, more: bool, other: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` again, then what followed it."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": more}]
    if other is not None:
        pending.append(other)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _small_json(body: bytes) -> object:
    """The body as JSON when it may be a cancel or an ``initialize`` (else ``None``:
    the SDK parses the others, once)."""
    if b"notifications/cancelled" not in body and b'"initialize"' not in body:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None  # the SDK answers it as the parse error it is


def _labelled(send: Send, label: str) -> Send:
    """``send``, the answer's head carrying ``label`` as its ``Mcp-Session-Id``."""

    async def labelled(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] < 400:
            headers = [
                (key, value)
                for key, value in message.get("headers", [])
                if key.lower() != _SESSION_HEADER
            ]
            headers.append((_SESSION_HEADER, label.encode("ascii")))
            message = {**message, "headers": headers}
        await send(message)

    return labelled
