"""A persona's memory of a caller, for the chat engine: what to add to a turn's prompt,
and what of a finished turn to keep.

Scoping is the safety property: a search reads only the rows of one persona and one
identified caller (an anonymous caller's: of one conversation), so nothing of one
caller's memory reaches another caller's prompt.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from persona_agent.memory.embeddings import Embedder
from persona_agent.memory.reembed import Reembedder
from persona_agent.memory.remembered import MemoryStore, Remembered
from persona_agent.memory.retrieval import search
from persona_agent.memory.scope import MemoryScope, Recalled, TurnMemory

__all__ = ["PersonaMemory"]

logger = logging.getLogger(__name__)

_SPEAKERS = {"user": "The user said", "assistant": "You said"}
MAX_REMEMBERED_CHARS = 4000
"""A message is remembered by its first 4,000 characters (about 1,000 tokens: a longer
one would not fit a turn's budget of remembered messages anyway)."""


class PersonaMemory(TurnMemory):
    """Memory in the database (:class:`MemoryStore`), searched by ``embedder``'s vectors
    and by keywords, within ``token_budget`` tokens and ``max_items`` items a turn; the
    memories of other embedders re-embedded in the background (:class:`Reembedder`),
    started with the first turn."""

    embedder: Embedder

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        *,
        token_budget: int = 400,
        max_items: int = 8,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.token_budget = token_budget
        self.max_items = max_items
        self.reembedder = Reembedder(store.vector_rows, embedder)

    async def recall(
        self, scope: MemoryScope, message: str, in_prompt: Sequence[str], *, new: bool = False
    ) -> Recalled:
        """As :meth:`TurnMemory.recall`; when the embedder fails (an endpoint down), the
        turn goes on without memory, and the error is logged."""
        self.reembedder.start()
        if new and scope.conversation_only:  # one new conversation's memory: empty
            return Recalled()
        try:
            return await self._recall(scope, message, in_prompt)
        except Exception:
            logger.exception("persona %s: memory could not be searched", scope.persona_id)
            return Recalled()

    async def keep(self, scope: MemoryScope, said: Sequence[dict[str, Any]]) -> None:
        """As :meth:`TurnMemory.keep`; when the embedder fails, the turn is not remembered
        (its history is kept all the same), and the error is logged."""
        try:
            await self._keep(scope, said)
        except Exception:
            logger.exception("persona %s: a turn could not be remembered", scope.persona_id)

    async def _recall(self, scope: MemoryScope, message: str, in_prompt: Sequence[str]) -> Recalled:
        if not message.strip():
            return Recalled()
        # The query's vector while the scope's index is brought up to date.
        query, (index, lock) = await asyncio.gather(
            self.embedder.embed([message], query=True),
            self.store.index(scope, self.embedder.name),
        )
        if not len(index):
            return Recalled()
        left_out: list[tuple[Remembered, str]] = []
        async with lock:  # a concurrent turn of the scope may extend the index
            # A matrix product and the query words' postings: off the event loop.
            chosen = await asyncio.to_thread(
                search,
                index,
                message,
                query[0],
                token_budget=self.token_budget,
                max_items=self.max_items,
                exclude=frozenset(text.strip()[:MAX_REMEMBERED_CHARS] for text in in_prompt),
                near_duplicate=near_duplicate(self.embedder),
                left_out=left_out,
            )
        return Recalled(map(_marked, chosen), ((_marked(item), why) for item, why in left_out))

    async def aclose(self) -> None:
        """Stop re-embedding."""
        await self.reembedder.aclose()

    async def _keep(self, scope: MemoryScope, said: Sequence[dict[str, Any]]) -> None:
        kept = [
            (message["role"], message["content"].strip()[:MAX_REMEMBERED_CHARS])
            for message in said
            if message.get("role") in _SPEAKERS
            and isinstance(message.get("content"), str)
            and message["content"].strip()
        ]
        if not kept:
            return
        vectors = await self.embedder.embed([text for _, text in kept])
        await self.store.add(scope, self.embedder.name, kept, vectors)


def near_duplicate(embedder: Embedder) -> float:
    """The cosine over which two remembered messages say the same, for ``embedder``
    (each model's cosines spread differently): its ``near_duplicate``, else 0.9."""
    value = getattr(embedder, "near_duplicate", 0.9)
    return float(value)


def _marked(item: Remembered) -> str:
    return f"{_SPEAKERS.get(item.role, item.role)}: {item.text}"
