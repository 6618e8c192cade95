"""An ASGI app served by uvicorn in a thread of the test process, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import TracebackType
from typing import Self

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["ServedInThread", "ThreadedServer"]

START_TIMEOUT = 120.0
"""Seconds after which a server that neither serves nor has stopped is given up on: a
safety bound against a hang (a start returns as soon as the server serves)."""


class ThreadedServer:
    """``start()`` binds a free port and returns once connections are accepted; ``stop()``."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self.app = app
        self.name = name
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, interface="asgi3", lifespan="off", log_config=None)
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True
        )
        self._server, self._thread = server, thread
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} did not start")
            time.sleep(0.01)
        return self.port

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)
            self._server = self._thread = None


class ServedInThread:
    """A test server as a context manager: ``_app`` served on :attr:`port` while inside."""

    label = "test server"
    port = 0

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._http = ThreadedServer(self._app, self.label)
        self.port = self._http.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._http.stop()
