"""PostgreSQL ``LISTEN``/``NOTIFY``: one listening connection per replica, shared.

Writers notify inside their transaction (:func:`notify_statement`, in the group commit
with the rows the notification is about), so PostgreSQL delivers the notification
after the rows are visible, in commit order. A replica holds one asyncpg connection
that listens on every channel its parts asked for (:meth:`Listener.listen`).

Notifications are a signal, never the data: a listener reads what changed from the
tables. A notification can be missed (the connection dropped, the replica was
busy reconnecting), so each part also reads on :meth:`Listener.on_reconnect` and on a
timer of its own; then nothing is lost, only later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import TextClause
from sqlalchemy.engine import URL

from persona_agent.db import NOTIFY

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]

__all__ = ["LISTENER_NAME", "Listener", "asyncpg_dsn", "notify_statement"]

logger = logging.getLogger(__name__)


def asyncpg_dsn(url: URL) -> str:
    """The asyncpg DSN of a SQLAlchemy ``postgresql+asyncpg://`` URL (password included)."""
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def notify_statement() -> TextClause:
    """The statement that notifies: write it with rows ``{"channel": ..., "payload": ...}``."""
    return NOTIFY


Callback = Callable[[str], None]
"""Called with a notification's payload, on the event loop; must not block."""


LISTENER_NAME = "persona-agent listener"
"""The listening connection's ``application_name``: what ``pg_stat_activity`` shows it as."""


class Listener:
    """One asyncpg connection listening on channels, reconnecting when it drops.

    ``start()`` connects (and raises if PostgreSQL cannot be reached), ``aclose()``
    stops. Callbacks registered with :meth:`listen` get each payload; those registered
    with :meth:`on_reconnect` run after each reconnection (a notification may have
    been missed meanwhile). A check every ``check_interval`` seconds finds a
    connection that died silently.
    """

    def __init__(self, url: URL, *, check_interval: float = 5.0) -> None:
        self._dsn = asyncpg_dsn(url)
        self._channels: dict[str, list[Callback]] = {}
        self._reconnected: list[Callable[[], Awaitable[None]]] = []
        self._connection: asyncpg.Connection | None = None
        self._runner: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._check_interval = check_interval
        self.reconnections = 0
        """How many times the connection was made again after it dropped."""

    async def listen(self, channel: str, callback: Callback) -> None:
        """Call ``callback`` with the payload of each notification on ``channel``."""
        first = channel not in self._channels
        self._channels.setdefault(channel, []).append(callback)
        if first and self._connection is not None:
            await self._connection.add_listener(channel, self._dispatch)

    def on_reconnect(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback`` after each reconnection (read what may have been missed)."""
        self._reconnected.append(callback)

    async def start(self) -> None:
        await self._connect()
        self._runner = asyncio.create_task(self._run(), name="persona-agent-listener")

    async def aclose(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.close(timeout=2)
            self._connection = None

    async def _connect(self) -> None:
        import asyncpg

        connection = await asyncpg.connect(
            self._dsn, server_settings={"application_name": LISTENER_NAME}
        )
        self._lost.clear()
        connection.add_termination_listener(lambda _connection: self._lost.set())
        for channel in self._channels:
            await connection.add_listener(channel, self._dispatch)
        self._connection = connection

    def _dispatch(self, _connection: Any, _pid: int, channel: str, payload: str) -> None:
        for callback in self._channels.get(channel, ()):
            try:
                callback(payload)
            except Exception:
                logger.exception("A listener of %s failed on %r", channel, payload)

    async def _run(self) -> None:
        delay = 0.1
        while True:
            if self._connection is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._lost.wait(), self._check_interval)
                if not self._lost.is_set():
                    try:
                        await self._connection.fetchval("SELECT 1", timeout=self._check_interval)
                        continue
                    except Exception:
                        logger.warning("The PostgreSQL listening connection stopped answering")
                with contextlib.suppress(Exception):
                    self._connection.terminate()
                self._connection = None
            try:
                await self._connect()
            except Exception as error:
                logger.warning("Cannot listen on PostgreSQL (%s); retrying in %.1fs", error, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.1
            self.reconnections += 1
            logger.info("Listening on PostgreSQL again")
            for callback in list(self._reconnected):
                try:
                    await callback()
                except Exception:
                    logger.exception("Catching up after a reconnection failed")
