"""Re-embedding: after a change of embedder, the rows another one made (remembered
messages, document passages) get the new one's vectors, a few at a time in the
background, so they are found again.

Vectors of different embedders cannot be compared, so a search reads only the current
embedder's rows; until re-embedded, older rows are not found. The work goes in
steps of a bounded number of rows, the newest first (the likeliest to matter), each
followed by a pause several times its length: a turn's own embedding waits for one
step at most, and the embedder stays mostly free for turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from persona_agent.db import GroupCommitWriter, Sql

if TYPE_CHECKING:  # numpy and the models are imported only once memory or documents need them
    from persona_agent.memory.embeddings import Embedder, Vectors

__all__ = ["Reembedder", "VectorRows"]

logger = logging.getLogger(__name__)


class VectorRows:
    """The rows of a ``table`` with ``seq``, ``model`` (the embedder's name), ``text`` and
    ``vector`` columns (``pa_memories``, ``pa_document_chunks``), as re-embedding reads
    and writes them. ``table``: its name."""

    def __init__(self, writer: GroupCommitWriter, table: str) -> None:
        self._db = writer
        name = table
        self._other_models = Sql(
            f"SELECT seq, model, text FROM {name} WHERE model != :model "
            "ORDER BY seq DESC LIMIT :limit",
            table=name,
        )
        self._reembed = Sql(
            f"UPDATE {name} SET model = :model, vector = :vector WHERE seq = :seq AND model = :old",
            table=name,
        )

    async def other_models(self, model: str, limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` rows whose vectors another embedder than ``model`` made, the
        newest first: (seq, their embedder, text)."""
        rows = await self._db.fetch(self._other_models, {"model": model, "limit": limit})
        return [(int(seq), str(old), str(text)) for seq, old, text in rows]

    async def reembedded(
        self, rows: Sequence[tuple[int, str]], model: str, vectors: Vectors
    ) -> None:
        """Give rows ((seq, their embedder) each) ``model``'s vectors. A row edited or
        re-embedded meanwhile (no longer of that embedder) is left as it is."""
        if not rows:
            return
        await self._db.write(
            self._reembed,
            [
                {
                    "seq": seq,
                    "old": old,
                    "model": model,
                    "vector": vector.astype("<f4").tobytes(),
                }
                for (seq, old), vector in zip(rows, vectors, strict=True)
            ],
        )


class Reembedder:
    """Re-embeds the ``store``'s rows of other embedders with ``embedder``, step by step
    (``what``: the rows, as the log names them)."""

    def __init__(
        self,
        store: VectorRows,
        embedder: Embedder,
        *,
        what: str = "memories",
        step_seconds: float = 0.05,
        max_rows: int = 64,
        idle_seconds: float = 300.0,
    ) -> None:
        """``step_seconds``: the embedding time a step aims at (its rows adapt to it);
        ``max_rows``: a step's rows, at most; ``idle_seconds``: how long to wait, once
        nothing is left, before looking again (another replica may write with another
        embedder)."""
        self.store = store
        self.embedder = embedder
        self.what = what
        self.step_seconds = step_seconds
        self.max_rows = max_rows
        self.idle_seconds = idle_seconds
        self.reembedded = 0
        """Rows re-embedded so far."""
        self._rows = min(8, max_rows)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the background work (once; called from a running event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def step(self) -> int:
        """Re-embed one step's rows; how many there were (0: none is left)."""
        rows = await self.store.other_models(self.embedder.name, min(self._rows, self.max_rows))
        if not rows:
            return 0
        started = time.perf_counter()
        vectors = await self.embedder.embed([text for _, _, text in rows])
        took = time.perf_counter() - started
        await self.store.reembedded(
            [(seq, old) for seq, old, _ in rows], self.embedder.name, vectors
        )
        self.reembedded += len(rows)
        if took > self.step_seconds:  # aim at step_seconds of embedding a step
            self._rows = max(1, self._rows // 2)
        elif took < self.step_seconds / 4:
            self._rows = min(self.max_rows, self._rows * 2)
        return len(rows)

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            try:
                done = await self.step()
            except Exception:
                logger.exception("%s could not be re-embedded (trying again later)", self.what)
                done = 0
            if done:
                await asyncio.sleep(max(0.01, 4 * (time.perf_counter() - started)))
            else:
                await asyncio.sleep(self.idle_seconds)

    async def aclose(self) -> None:
        """Stop the background work."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
