"""Remembered turns in the hub's database, each with its vector, by persona and caller;
and, in each hub process, the scopes lately searched kept indexed in memory.

An identified caller's memory with a persona is every conversation of theirs with it;
an anonymous caller's is one conversation (nothing ties its conversations together).
Vectors are float32 bytes beside the text, the same on SQLite and PostgreSQL, so
replicas share memory.

The database is the truth; the in-memory index of a scope (:class:`ScopeIndex`) is a
copy that each search first checks: one indexed query gives the scope's row count and
highest seq. Unchanged, the copy is used as it is; grown by rows of higher seqs only, it
reads just those; anything else (a row deleted, edited, which is a delete and an insert,
or re-embedded, by this hub or another replica) reads the scope again. So replicas on
one database stay correct without telling each other anything.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.memory.embeddings import Vectors
from persona_agent.memory.index import Remembered, ScopeIndex
from persona_agent.memory.records import INSERT_MEMORY
from persona_agent.memory.reembed import VectorRows
from persona_agent.memory.scope import MemoryScope

__all__ = ["MemoryStore", "Remembered"]

_TABLE = "pa_memories"  # memory_table.memories_table


def _scope_statements(anonymous: bool) -> dict[str, Sql]:
    """A scope's queries: of an identified caller (``owner``, every conversation) or of
    an anonymous one (one ``conversation``)."""
    scope = "persona_id = :persona_id AND owner = :owner AND model = :model"
    if anonymous:
        scope += " AND conversation = :conversation"
    chosen = f"SELECT seq, role, text, at_ms, vector FROM {_TABLE} WHERE {scope}"
    return {
        "state": Sql(f"SELECT count(seq), max(seq) FROM {_TABLE} WHERE {scope}", table=_TABLE),
        "newest": Sql(f"{chosen} AND seq <= :top ORDER BY seq DESC LIMIT :limit", table=_TABLE),
        "after": Sql(f"{chosen} AND seq > :after AND seq <= :top ORDER BY seq", table=_TABLE),
    }


_STATEMENTS = {anonymous: _scope_statements(anonymous) for anonymous in (False, True)}


@dataclass
class _Cached:
    """A scope's index and the (count, highest seq) of the database it reflects."""

    index: ScopeIndex
    count: int
    top: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class MemoryStore:
    """Rows of ``pa_memories``, written in the database's group commit; searched through
    an index per scope, kept for the scopes lately used within ``cache_bytes``."""

    def __init__(
        self,
        writer: GroupCommitWriter,
        *,
        max_rows: int = 20_000,
        cache_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        """``max_rows``: the most recent rows of a scope searched; ``cache_bytes``: the
        indexes kept in memory, at most (the least lately used go first)."""
        self._db = writer
        self.max_rows = max_rows
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[str, str, str, str], _Cached] = OrderedDict()
        self._cached_bytes = 0
        self.reads = 0
        """Scopes read from the database whole (a test and the bench watch it)."""
        self.vector_rows = VectorRows(writer, _TABLE)
        """The rows as re-embedding reads and writes them."""

    async def add(
        self, scope: MemoryScope, model: str, items: Sequence[tuple[str, str]], vectors: Vectors
    ) -> None:
        """Remember ``items`` ((role, text) each) with their vectors (one row each)."""
        now = int(time.time() * 1000)
        rows = [
            {
                "persona_id": scope.persona_id,
                "owner": scope.owner,
                "conversation": scope.conversation,
                "role": role,
                "text": text,
                "model": model,
                "vector": vector.astype("<f4").tobytes(),
                "at_ms": now,
            }
            for (role, text), vector in zip(items, vectors, strict=True)
        ]
        if rows:
            await self._db.write(INSERT_MEMORY, rows)

    async def load(self, scope: MemoryScope, model: str) -> tuple[list[Remembered], Vectors]:
        """The scope's remembered messages (newest first) whose vectors ``model`` made,
        and those vectors (one row each)."""
        index, lock = await self._index(scope, model)
        async with lock:
            return index.items[::-1], index.vectors[::-1].copy()

    async def index(self, scope: MemoryScope, model: str) -> tuple[ScopeIndex, asyncio.Lock]:
        """The scope's index, up to date with the database, and the lock to hold while
        reading it (a concurrent search of the scope may extend it)."""
        return await self._index(scope, model)

    async def _index(self, scope: MemoryScope, model: str) -> tuple[ScopeIndex, asyncio.Lock]:
        key = (scope.persona_id, scope.owner, "" if scope.owner else scope.conversation, model)
        statements = _STATEMENTS[not scope.owner]
        parameters: dict[str, object] = {
            "persona_id": scope.persona_id,
            "owner": scope.owner,
            "model": model,
        }
        if not scope.owner:
            parameters["conversation"] = scope.conversation
        cached = self._cache.get(key)
        lock = cached.lock if cached is not None else asyncio.Lock()
        async with lock:
            cached = self._cache.get(key)  # another search may have refreshed it meanwhile
            [(count, top)] = await self._db.fetch(statements["state"], parameters)
            count, top = int(count), int(top or 0)
            if not count:  # nothing to index (and no dimensions to index it by)
                self._forget(key)
                return ScopeIndex(0), lock
            if cached is not None and (cached.count, cached.top) == (count, top):
                self._cache.move_to_end(key)
                return cached.index, cached.lock
            index = None
            if cached is not None and top > cached.top:
                rows = await self._db.fetch(
                    statements["after"], {**parameters, "after": cached.top, "top": top}
                )
                if cached.count + len(rows) == count:  # only added: no delete, no edit
                    index = cached.index
                    self._forget(key)
                    index.extend(_decoded(rows))
                    if len(index) > self.max_rows * 5 // 4:  # outgrown: keep the newest
                        index = index.newest(self.max_rows)
            if index is None:
                self._forget(key)
                rows = await self._db.fetch(
                    statements["newest"], {**parameters, "top": top, "limit": self.max_rows}
                )
                self.reads += 1
                dimensions = len(rows[0][4]) // 4 if rows else 0
                index = ScopeIndex(dimensions)
                index.extend(_decoded(reversed(rows)))
            entry = _Cached(index, count, top, lock)
            self._keep(key, entry)
            return index, lock

    def _forget(self, key: tuple[str, str, str, str]) -> None:
        gone = self._cache.pop(key, None)
        if gone is not None:
            self._cached_bytes -= gone.index.nbytes

    def _keep(self, key: tuple[str, str, str, str], entry: _Cached) -> None:
        """Cache the scope's index unless it alone is over the bound; the least lately
        used go until the rest fits."""
        size = entry.index.nbytes
        if size > self.cache_bytes:
            return
        self._cache[key] = entry
        self._cached_bytes += size
        while self._cached_bytes > self.cache_bytes:
            _, oldest = self._cache.popitem(last=False)
            self._cached_bytes -= oldest.index.nbytes

    @property
    def cached_bytes(self) -> int:
        """What the cached indexes hold, about (within ``cache_bytes``)."""
        return self._cached_bytes


def _decoded(
    rows: Sequence[tuple[object, ...]] | reversed[tuple[object, ...]],
) -> list[tuple[int, Remembered, Vectors]]:
    return [
        (
            int(seq),  # type: ignore[call-overload]
            Remembered(str(role), str(text), int(at_ms)),  # type: ignore[call-overload]
            np.frombuffer(vector, dtype="<f4"),  # type: ignore[call-overload]
        )
        for seq, role, text, at_ms, vector in rows
    ]
