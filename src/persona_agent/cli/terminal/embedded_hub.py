"""The hub a terminal chat starts in its own process, served on a free loopback port.

``persona-agent chat ID`` without ``--url`` talks with a hub it starts on the settings of
``serve``, on the chat's event loop (:mod:`persona_agent.cli.terminal.chat_loop`), for as long as
the chat lasts; the hub's log goes to a file in the data directory, not between the lines
of the chat. uvicorn and the hub are imported when the hub starts, not with this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from typing import TYPE_CHECKING

from persona_agent.cli.command_settings import fail
from persona_agent.cli.terminal.chat_loop import ChatLoop
from persona_agent.settings import Settings

if TYPE_CHECKING:
    import uvicorn

__all__ = ["HUB_LOG_FILE", "EmbeddedHub"]

HUB_LOG_FILE = "chat-hub.log"
"""In the data directory: the log of the hub a chat starts in its process."""


class EmbeddedHub:
    """The hub on the settings of ``serve``, served on a free loopback port of this
    process while the chat lasts; its log goes to a file in the data directory, not
    between the lines of the chat."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.log_file = settings.data_dir / HUB_LOG_FILE
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, loop: ChatLoop) -> str:
        """Start the hub; its base URL. Exits, saying why, if it cannot start."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        settings = self.settings.model_copy(
            update={"host": "127.0.0.1", "port": sock.getsockname()[1], "public_base_url": url}
        )
        self._log_to_file(settings)
        import uvicorn

        from persona_agent.api.app import create_app
        from persona_agent.errors import ConfigError, PersonaFileError

        try:
            application = create_app(settings)
        except (ConfigError, PersonaFileError) as error:
            sock.close()
            fail(f"Cannot start the hub: {error}")
        config = uvicorn.Config(
            application,
            lifespan="on",
            log_config=None,  # the hub's redacting logging, to the file
            timeout_graceful_shutdown=max(1, int(settings.shutdown_grace_seconds)),
            ws="none",  # no route takes a WebSocket: "auto" would load a WebSocket library
        )
        self._server = uvicorn.Server(config)
        if not loop.run(self._serve(self._server, sock)):
            fail(f"The hub did not start: see its log, {self.log_file}")
        return url

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> bool:
        """Whether the server started (its start-up, the lifespan, may have failed)."""
        self._task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if self._task.done():
                if (error := self._task.exception()) is not None:
                    logging.getLogger(__name__).error("The hub stopped", exc_info=error)
                return False
            await asyncio.sleep(0.02)
        return True

    async def stop(self) -> None:
        """Stop the hub, its lifespan's shutdown included."""
        if self._server is None or self._task is None or self._task.done():
            return
        self._server.should_exit = True
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            async with asyncio.timeout(self.settings.shutdown_grace_seconds + 5):
                await self._task

    def _log_to_file(self, settings: Settings) -> None:
        from persona_agent.cli.secrets import configured_secrets
        from persona_agent.observe.logs import configure_logging

        root = logging.getLogger()
        try:
            configure_logging(
                settings.log_level, configured_secrets(settings, os.environ), settings.log_format
            )
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            to_file = logging.FileHandler(self.log_file, encoding="utf-8")
        except (ValueError, OSError) as error:
            fail(f"Cannot start the hub: its log: {error}")
        for handler in list(root.handlers):  # the one configure_logging set, to stderr
            to_file.setFormatter(handler.formatter)
            root.removeHandler(handler)
        root.addHandler(to_file)
