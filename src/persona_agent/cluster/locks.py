"""One turn at a time per conversation across replicas: PostgreSQL advisory locks.

A turn first takes the replica's own lock of its conversation (so a replica holds
at most one database connection per conversation, however many of its requests
wait), then a session advisory lock on a connection of the pool, keyed by a 64-bit
hash of the conversation key, held until the turn ends. A replica that dies loses
its connections, and PostgreSQL releases their locks at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.chat.locks import KeyedLocks

__all__ = ["AdvisoryLocks", "advisory_key"]

_LOCK = text("SELECT pg_advisory_lock(:key)")
_UNLOCK = text("SELECT pg_advisory_unlock(:key)")


def advisory_key(key: str) -> int:
    """A signed 64-bit integer for ``key`` (PostgreSQL's advisory lock keys are bigint)."""
    digest = hashlib.blake2b(f"persona-agent:conversation:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisoryLocks(KeyedLocks):
    """:class:`~persona_agent.chat.locks.KeyedLocks` that also hold across replicas."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__()
        self._engine = engine

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        async with super().hold(key):
            lock = {"key": advisory_key(key)}
            conn = await self._engine.connect()
            try:
                try:
                    await conn.execute(_LOCK, lock)
                except BaseException:
                    # Canceled while waiting: the session may still get the lock; ending
                    # the connection's session releases whatever it holds.
                    await conn.invalidate()
                    raise
                try:
                    yield
                finally:
                    try:
                        await conn.execute(_UNLOCK, lock)
                        await conn.commit()
                    except Exception:
                        await conn.invalidate()  # its session ends, and the lock with it
            finally:
                await conn.close()
