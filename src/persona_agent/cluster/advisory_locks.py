"""One turn at a time per conversation across replicas: PostgreSQL advisory locks.

A turn first takes the replica's own lock of its conversation (its other requests for
that conversation wait in the replica, at no cost to the database), then the
conversation's advisory lock, keyed by a 64-bit hash of the conversation key. Every
advisory lock of a replica is held by one session of its own, a dedicated connection
outside the pool: a turn holds no pooled connection while the model answers, so the
pool serves the task store however many turns run (one connection per waiting turn
would exhaust it, and a turn that holds a lock and waits for a connection to save its
task would wait for itself). ``pg_try_advisory_lock`` never blocks that session; a turn
whose conversation is busy on another replica tries again every few milliseconds (rare:
it takes two replicas answering one conversation at the same moment).

A replica that dies loses its session, and PostgreSQL releases its locks at once. If
the session drops while the replica lives, its locks are gone too: turns under way
finish unguarded (logged), later ones lock on a new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

from persona_agent.chat.conversation_locks import KeyedLocks
from persona_agent.cluster.notify import asyncpg_dsn

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]

__all__ = ["AdvisoryLocks", "advisory_key"]

logger = logging.getLogger(__name__)

_RETRY_FIRST, _RETRY_MOST = 0.005, 0.1
"""Seconds between tries for a conversation locked elsewhere: doubling, up to the most."""


def advisory_key(key: str) -> int:
    """A signed 64-bit integer for ``key`` (PostgreSQL's advisory lock keys are bigint)."""
    digest = hashlib.blake2b(f"persona-agent:conversation:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisoryLocks(KeyedLocks):
    """:class:`~persona_agent.chat.conversation_locks.KeyedLocks` that also hold across replicas."""

    def __init__(self, url: URL) -> None:
        super().__init__()
        self._dsn = asyncpg_dsn(url)
        self._session: Any = None  # asyncpg.Connection
        self._using = asyncio.Lock()  # one statement at a time on the session

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        async with super().hold(key):
            lock = advisory_key(key)
            session = await self._acquire(lock)
            try:
                yield
            finally:
                await self._release(lock, session)

    async def _acquire(self, lock: int) -> asyncpg.Connection:
        delay = _RETRY_FIRST
        while True:
            async with self._using:
                session = await self._connected()
                attempt = asyncio.ensure_future(
                    session.fetchval("SELECT pg_try_advisory_lock($1)", lock)
                )
                try:
                    if await asyncio.shield(attempt):
                        return session
                except asyncio.CancelledError:
                    # The caller gave up; the session may have the lock all the same.
                    with contextlib.suppress(Exception):
                        if await attempt:
                            await session.fetchval("SELECT pg_advisory_unlock($1)", lock)
                    raise
                except Exception:
                    self._drop(session)
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MOST)

    async def _release(self, lock: int, session: asyncpg.Connection) -> None:
        async with self._using:
            if session is not self._session or session.is_closed():
                logger.warning("The advisory lock session dropped during a turn")
                return
            try:
                await session.fetchval("SELECT pg_advisory_unlock($1)", lock)
            except Exception:
                logger.warning("Releasing an advisory lock failed; its session is closed")
                self._drop(session)  # closing the session releases its locks

    async def _connected(self) -> asyncpg.Connection:
        session = self._session
        if session is None or session.is_closed():
            import asyncpg

            session = self._session = await asyncpg.connect(self._dsn)
        return session

    def _drop(self, session: asyncpg.Connection) -> None:
        if self._session is session:
            self._session = None
        session.terminate()

    async def aclose(self) -> None:
        """Close the session (its locks go with it)."""
        async with self._using:
            if self._session is not None:
                await self._session.close(timeout=2)
                self._session = None
