"""A caller's remembered messages as records they manage (REST: docs/memory.md,
"Managing memory"): listed, searched, edited, deleted, exported, forgotten.

Every statement names the owner: a record of another caller is not found (the API answers
404, never saying it exists). An edit is a delete and an insert, so the edited message
has a new ``seq`` and a new vector: whatever caches a scope's rows, validated by the
scope's (count, max seq), sees the change. Nothing here imports numpy or a model: a hub
with memory off lists, exports and forgets what was kept when memory was on.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from persona_agent.db import GroupCommitWriter, Sql

if TYPE_CHECKING:
    from persona_agent.memory.embeddings import Embedder

__all__ = [
    "INSERT_MEMORY",
    "MAX_TEXT",
    "MemoryOff",
    "MemoryRecord",
    "MemoryRecords",
    "context_id_of",
]

MAX_TEXT = 4000
"""An edited memory's text, at most (as a remembered message is kept: its first 4,000
characters, :data:`persona_agent.memory.recall.MAX_REMEMBERED_CHARS`)."""

_TABLE = "pa_memories"  # memory_table.memories_table
_COLUMNS = "seq, persona_id, conversation, role, text, at_ms"
"""A :class:`MemoryRecord`'s columns, in its fields' order."""
_MINE = "persona_id = :persona_id AND owner = :owner"
"""The caller's records with the persona."""

_NEWEST = Sql(
    f"SELECT {_COLUMNS} FROM {_TABLE} WHERE {_MINE} AND seq < :before "
    "ORDER BY seq DESC LIMIT :limit",
    table=_TABLE,
)
_OLDEST = Sql(
    f"SELECT {_COLUMNS} FROM {_TABLE} WHERE {_MINE} AND seq > :after ORDER BY seq LIMIT :limit",
    table=_TABLE,
)
_ONE = Sql(f"SELECT {_COLUMNS}, model FROM {_TABLE} WHERE {_MINE} AND seq = :seq", table=_TABLE)
_EDITED = Sql(
    f"SELECT {_COLUMNS} FROM {_TABLE} WHERE {_MINE} AND seq > :seq AND text = :text "
    "ORDER BY seq DESC LIMIT 1",
    table=_TABLE,
)
_OF_MODEL = Sql(
    f"SELECT {_COLUMNS}, vector FROM {_TABLE} WHERE {_MINE} AND model = :model "
    "ORDER BY seq DESC LIMIT :limit",
    table=_TABLE,
)
_DELETE_ONE = Sql(f"DELETE FROM {_TABLE} WHERE {_MINE} AND seq = :seq", table=_TABLE)
_COUNT_OWNER = Sql(f"SELECT count(*) FROM {_TABLE} WHERE owner = :owner", table=_TABLE)
_DELETE_OWNER = Sql(f"DELETE FROM {_TABLE} WHERE owner = :owner", table=_TABLE)
_DELETE_SUMMARIES = Sql(
    "DELETE FROM pa_summaries WHERE owner = :owner",  # conversations.summary_store's table
    table="pa_summaries",
)
INSERT_MEMORY = Sql(
    f"INSERT INTO {_TABLE} (persona_id, owner, conversation, role, text, model, vector, at_ms) "
    "VALUES (:persona_id, :owner, :conversation, :role, :text, :model, :vector, :at_ms)",
    table=_TABLE,
)
"""A remembered message (an edit's, here; each turn's, :mod:`.remembered`)."""


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One remembered message of a caller with a persona."""

    seq: int
    """Its id: grows with every message remembered (an edit gets a new one)."""
    persona_id: str
    conversation: str
    """The engine's conversation key (``@{caller}:{contextId}`` for an identified caller)."""
    role: str
    text: str
    at_ms: int
    """When it was remembered (or edited), ms since the epoch."""


class MemoryOff(Exception):
    """Searching or editing needs the hub's embedder, and memory is off."""


class MemoryRecords:
    """``pa_memories`` rows by persona and owner (an identified caller), in the database's
    group commit; ``embedder``: the one the chat engine uses (``None``: memory is off, so
    nothing can be searched or edited)."""

    def __init__(
        self,
        writer: GroupCommitWriter,
        embedder: Embedder | None = None,
        *,
        max_rows: int = 20_000,
    ) -> None:
        """``max_rows``: the most recent rows a search reads (as the prompt's search)."""
        self._db = writer
        self.embedder = embedder
        self._max_rows = max_rows

    async def page(
        self, persona_id: str, owner: str, *, before: int | None, limit: int
    ) -> list[MemoryRecord]:
        """The newest ``limit`` records older than ``before`` (a ``seq``; ``None``: from
        the newest), newest first."""
        rows = await self._db.fetch(
            _NEWEST,
            {
                "persona_id": persona_id,
                "owner": owner,
                "before": before if before is not None else 2**62,
                "limit": limit,
            },
        )
        return [MemoryRecord(*row) for row in rows]

    async def oldest_after(
        self, persona_id: str, owner: str, *, after: int, limit: int
    ) -> list[MemoryRecord]:
        """The oldest ``limit`` records newer than ``after`` (a ``seq``), oldest first: an
        export's pages."""
        rows = await self._db.fetch(
            _OLDEST,
            {"persona_id": persona_id, "owner": owner, "after": after, "limit": limit},
        )
        return [MemoryRecord(*row) for row in rows]

    async def get(self, persona_id: str, owner: str, seq: int) -> MemoryRecord | None:
        """The record ``seq`` if it is this caller's with this persona, else ``None``."""
        rows = await self._db.fetch(_ONE, {"persona_id": persona_id, "owner": owner, "seq": seq})
        return MemoryRecord(*rows[0][:6]) if rows else None

    async def delete(self, persona_id: str, owner: str, seq: int) -> bool:
        """Delete the record ``seq`` if it is this caller's with this persona; whether it
        was there."""
        if await self.get(persona_id, owner, seq) is None:
            return False
        await self._db.write(_DELETE_ONE, [{"persona_id": persona_id, "owner": owner, "seq": seq}])
        return True

    async def edit(self, persona_id: str, owner: str, seq: int, text: str) -> MemoryRecord | None:
        """Replace the text of the record ``seq`` (this caller's with this persona, else
        ``None``): the new text is embedded and inserted (a new ``seq``, the time now),
        then the old record deleted. Inserted first: a failure between the two leaves
        both, never neither.

        Raises:
            MemoryOff: memory is off (no embedder to make the new vector).
        """
        embedder = self._embedder()
        old = await self.get(persona_id, owner, seq)
        if old is None:
            return None
        vector = (await embedder.embed([text]))[0]
        now = int(time.time() * 1000)
        row = {
            "persona_id": persona_id,
            "owner": owner,
            "conversation": old.conversation,
            "role": old.role,
            "text": text,
            "model": embedder.name,
            "vector": vector.astype("<f4").tobytes(),
            "at_ms": now,
        }
        await self._db.write(INSERT_MEMORY, [row])
        await self._db.write(_DELETE_ONE, [{"persona_id": persona_id, "owner": owner, "seq": seq}])
        found = await self._db.fetch(
            _EDITED,
            {"persona_id": persona_id, "owner": owner, "seq": seq, "text": text},
        )
        return MemoryRecord(*found[0]) if found else None

    async def search(
        self, persona_id: str, owner: str, query: str, *, limit: int
    ) -> list[MemoryRecord]:
        """The caller's records most relevant to ``query``, best first: the prompt's
        retrieval (:func:`~persona_agent.memory.retrieval.select_remembered`, meaning and
        keywords fused by rank) over the same rows, without its token budget.

        Raises:
            MemoryOff: memory is off (no embedder for the query).
        """
        embedder = self._embedder()
        # Imported here: only a hub with memory on (an embedder) has numpy loaded already.
        import numpy as np

        from persona_agent.memory.remembered import Remembered
        from persona_agent.memory.retrieval import select_remembered

        if not query.strip():
            return []
        rows = await self._db.fetch(
            _OF_MODEL,
            {
                "persona_id": persona_id,
                "owner": owner,
                "model": embedder.name,
                "limit": self._max_rows,
            },
        )
        if not rows:
            return []
        query_vector = (await embedder.embed([query], query=True))[0]

        def chosen() -> list[MemoryRecord]:
            records = [MemoryRecord(*row[:6]) for row in rows]
            items = [Remembered(record.role, record.text, record.at_ms) for record in records]
            by_item = {id(item): record for item, record in zip(items, records, strict=True)}
            vectors = np.vstack([np.frombuffer(row[6], dtype="<f4") for row in rows])
            best = select_remembered(
                query, query_vector, items, vectors, token_budget=2**31, max_items=limit
            )
            return [by_item[id(item)] for item in best]

        # Linear in the caller's rows (up to max_rows), as the prompt's search: off the loop.
        return await asyncio.to_thread(chosen)

    async def forget_owner(self, owner: str) -> int:
        """Delete every record of ``owner`` with every persona, and the running summaries
        of its conversations; how many records there were (counted just before)."""
        rows = await self._db.fetch(_COUNT_OWNER, {"owner": owner})
        await asyncio.gather(
            self._db.write(_DELETE_OWNER, [{"owner": owner}]),
            self._db.write(_DELETE_SUMMARIES, [{"owner": owner}]),
        )
        return int(rows[0][0]) if rows else 0

    def _embedder(self) -> Embedder:
        if self.embedder is None:
            raise MemoryOff(
                "Memory is off on this hub (PERSONA_AGENT_MEMORY=on turns it on): what was "
                "remembered can be listed, exported and deleted, not searched or edited"
            )
        return self.embedder


def context_id_of(owner: str, conversation: str) -> str:
    """The caller's ``contextId`` of a conversation key (the key itself if it is not one
    of ``owner``'s)."""
    prefix = f"@{quote(owner, safe='')}:"
    return conversation[len(prefix) :] if conversation.startswith(prefix) else conversation
