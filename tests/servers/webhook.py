"""A webhook receiver for the push-notification tests: a real HTTP server on 127.0.0.1
(uvicorn in a thread) that records each request and answers as scripted."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send

__all__ = ["Received", "Webhook"]


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class Webhook:
    """Records POSTs; :attr:`answers` (status codes, popped one per request; then 200)
    and :attr:`delay` (seconds before answering) script it."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: list[int] = []
        self.delay = 0.0
        self.port = 0
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_for(self, count: int, timeout: float = 15.0) -> list[Received]:
        """Block until ``count`` requests have come (call through ``asyncio.to_thread``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= count:
                    return list(self.received)
            time.sleep(0.02)
        raise AssertionError(f"webhook: {len(self.received)} requests, waited for {count}")

    def __enter__(self) -> Webhook:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app, interface="asgi3", lifespan="off", log_config=None)
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the webhook did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)

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
        if self.delay:
            await asyncio.sleep(self.delay)
        extra = [(b"location", b"http://127.0.0.1:9/elsewhere")] if 300 <= status < 400 else []
        await send({"type": "http.response.start", "status": status, "headers": extra})
        await send({"type": "http.response.body", "body": b""})
