"""A webhook receiver for the push-notification tests: a real HTTP server on 127.0.0.1
(uvicorn in a thread) that records each request and answers as scripted."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from starlette.types import Receive, Scope, Send

from tests.servers.threaded import ServedInThread

__all__ = ["Received", "Webhook"]


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


HELD_AT_MOST = 300.0
"""Seconds a held request (:meth:`Webhook.hold`) waits for the release at most: a safety
bound, so that a failed test leaves no request waiting for ever."""
WAIT = 60.0
"""Seconds :meth:`Webhook.wait_for` waits by default: a safety bound, not a timing."""


class Webhook(ServedInThread):
    """Records POSTs; :attr:`answers` (status codes, popped one per request; then 200),
    :attr:`delay` (seconds before answering), :meth:`hold` (no answer until
    :meth:`release`: a slow webhook shown by events, not by the clock) and
    :attr:`retry_after` (the header of a 429 or 5xx answer) script it. :attr:`answered`
    counts the answers sent."""

    label = "webhook"

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: list[int] = []
        self.delay = 0.0
        self.retry_after = ""
        self.answered = 0
        self._held = False
        self._released = threading.Event()
        self._lock = threading.Lock()

    def hold(self) -> None:
        """Answer no request until :meth:`release` (each is recorded as it comes)."""
        self._released.clear()
        self._held = True

    def release(self) -> None:
        """Answer the held requests, and the next ones at once."""
        self._held = False
        self._released.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()  # nothing held keeps the server from stopping
        super().__exit__(exc_type, exc, tb)

    def wait_for(self, count: int, timeout: float = WAIT) -> list[Received]:
        """Block until ``count`` requests have come (call through ``asyncio.to_thread``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        raise AssertionError(f"webhook: {len(self.received)} requests, waited for {count}")

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body = json.loads(b"".join(chunks) or b"{}")
        except ValueError:
            body = {}
        with self._lock:
            self.received.append(Received(scope["path"], headers, body))
            status = self.answers.pop(0) if self.answers else 200
        if self._held:
            await asyncio.to_thread(self._released.wait, HELD_AT_MOST)
        if self.delay:
            await asyncio.sleep(self.delay)
        extra = [(b"location", b"http://127.0.0.1:9/elsewhere")] if 300 <= status < 400 else []
        if self.retry_after and (status == 429 or status >= 500):
            extra.append((b"retry-after", self.retry_after.encode()))
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": b""})
        with self._lock:
            self.answered += 1
