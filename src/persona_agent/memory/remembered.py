"""Remembered turns in the hub's database, each with its vector, by persona and caller.

An identified caller's memory with a persona is every conversation of theirs with it;
an anonymous caller's is one conversation (nothing ties its conversations together).
Vectors are float32 bytes beside the text: the portable path scores them with numpy
over the scope's rows, on SQLite and PostgreSQL alike, so replicas share memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import and_, bindparam, insert, select

from persona_agent.db import GroupCommitWriter, memories_table
from persona_agent.memory.embeddings import Vectors
from persona_agent.memory.scope import MemoryScope

__all__ = ["MemoryStore", "Remembered"]


@dataclass(frozen=True, slots=True)
class Remembered:
    """One remembered message: who said it, its text, when (ms since the epoch)."""

    role: str
    text: str
    at_ms: int


class MemoryStore:
    """Rows of ``pa_memories``, written in the database's group commit."""

    def __init__(self, writer: GroupCommitWriter, *, max_rows: int = 20_000) -> None:
        """``max_rows``: the most recent rows of a scope read for one search."""
        self._db = writer
        self._insert = insert(memories_table)
        columns = memories_table.c
        where = and_(
            columns.persona_id == bindparam("persona_id"),
            columns.owner == bindparam("owner"),
            columns.model == bindparam("model"),
        )
        chosen = (columns.role, columns.text, columns.at_ms, columns.vector)
        self._of_owner = select(*chosen).where(where).order_by(columns.seq.desc()).limit(max_rows)
        self._of_conversation = (
            select(*chosen)
            .where(where, columns.conversation == bindparam("conversation"))
            .order_by(columns.seq.desc())
            .limit(max_rows)
        )

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
            await self._db.write(self._insert, rows)

    async def load(self, scope: MemoryScope, model: str) -> tuple[list[Remembered], Vectors]:
        """The scope's remembered messages (newest first) whose vectors ``model`` made,
        and those vectors (one row each)."""
        parameters = {"persona_id": scope.persona_id, "owner": scope.owner, "model": model}
        if scope.owner:
            rows = await self._db.fetch(self._of_owner, parameters)
        else:
            parameters["conversation"] = scope.conversation
            rows = await self._db.fetch(self._of_conversation, parameters)
        items = [Remembered(row[0], row[1], row[2]) for row in rows]
        if not rows:
            return items, np.zeros((0, 0), dtype=np.float32)
        vectors = np.vstack([np.frombuffer(row[3], dtype="<f4") for row in rows])
        return items, vectors.astype(np.float32, copy=False)
