"""Slow clients: a deadline for a request's head and one for its body.

uvicorn times out an idle keep-alive connection, but not a client that sends its
headers, or its body, a byte at a time: each byte counts as activity, and a few
hundred such connections hold the server's sockets and memory ("slowloris"). The
protocol class :func:`slow_client_protocol` makes is uvicorn's own HTTP protocol
with two timers: from the connection (or the end of the previous response) to a
request's complete head, and from the head to the end of its body. A client that
misses either is disconnected (logged at INFO). Responses, streams included, are not
timed: an answer may take as long as the model takes. Nor is the time a request waits
on its connection for an earlier one's answer (HTTP/1.1 pipelining): the timer starts
again while the hub is the one behind.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from persona_agent.security.ingress.request_heads import uvicorn_protocol

__all__ = ["slow_client_protocol"]

logger = logging.getLogger(__name__)


def slow_client_protocol(
    *, head_timeout: float, body_timeout: float, base: type[asyncio.Protocol] | None = None
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (``uvicorn.Config(http=...)``; ``base``, by default the one
    uvicorn picks: :func:`~persona_agent.security.ingress.request_heads.uvicorn_protocol`),
    disconnecting a client whose request head takes more than ``head_timeout`` seconds or
    whose body takes more than ``body_timeout`` seconds to arrive."""
    parent: type[Any] = base if base is not None else uvicorn_protocol()

    class SlowClientProtocol(parent):  # type: ignore[misc]
        _deadline: asyncio.TimerHandle | None = None
        _waiting_for: Any = None  # the request cycle whose successor's head is awaited

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = self.cycle
            if cycle is self._waiting_for:
                return  # still reading a head (the timer runs on)
            if cycle.more_body:
                if self._waiting_for is not _BODY:
                    self._start(body_timeout, "its body")
                    self._waiting_for = _BODY
            elif self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._waiting_for = self.cycle
            self._start(head_timeout, "its request head")

        def _start(self, seconds: float, what: str) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(seconds, self._expire, seconds, what)

        def _expire(self, seconds: float, what: str) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            cycle = self.cycle
            # httptools queues pipelined requests in ``pipeline``; h11 has none (it reads
            # the next request only once an answer is sent).
            if getattr(self, "pipeline", None) or (
                cycle is not None and not cycle.more_body and not cycle.response_complete
            ):
                # The hub is behind, not the client: a request whose answer is under way
                # (a pipelined one waits for it, and uvicorn reads no more meanwhile).
                self._start(seconds, what)
                return
            client = "{}:{}".format(*self.client) if self.client else "a client"
            logger.info("Closing the connection of %s: %s took over %gs", client, what, seconds)
            if self.cycle is not None and not self.cycle.response_complete:
                self.cycle.disconnected = True
                self.cycle.message_event.set()
            self.transport.close()

    return SlowClientProtocol


_BODY = object()
"""Marks a request whose body is awaited."""
