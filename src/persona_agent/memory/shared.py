"""Memory as the hub serves it: each persona's own settings (on or off, its budget), memory
shared between personas that name each other, what the memory tools do (remember, recall,
forget), and the spans and metrics of every search.

Scoping stays the safety property (:mod:`persona_agent.memory.recall`): every read and
every delete names one caller (one conversation when anonymous); sharing widens a search
to other personas' memory of that same caller, never to another caller's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.memory.embeddings import Embedder
from persona_agent.memory.index import FACT_ROLE
from persona_agent.memory.recall import MAX_REMEMBERED_CHARS, PersonaMemory, near_duplicate
from persona_agent.memory.remembered import Remembered
from persona_agent.memory.retrieval import estimate_tokens, select_remembered
from persona_agent.memory.retrieval import search as search_index
from persona_agent.memory.scope import MemoryScope, Recalled, TurnMemory
from persona_agent.memory.words import words
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.observe.tracing import TRACER
from persona_agent.personas.model import Persona

__all__ = ["FACT_ROLE", "Found", "SharedMemory", "memory_id"]

logger = logging.getLogger(__name__)

MAX_FACT_CHARS = 1000
"""A fact the model keeps is its first 1,000 characters: a fact, not a transcript."""
_NAMES_NO_MEMORY = frozenset(["all", "any", "anything", "everything", "user"])
"""Words of a ``forget`` request that name no memory, beside the stop words
(:data:`persona_agent.memory.words.STOP_WORDS`): "forget everything about my dog"."""

_SAME_TEXT = "DELETE FROM pa_memories WHERE persona_id = :persona_id AND text = :text"
_FORGET_OF_OWNER = Sql(f"{_SAME_TEXT} AND owner = :owner", table="pa_memories")
"""An identified caller's rows of a text with a persona."""
_FORGET_IN_CONVERSATION = Sql(
    f"{_SAME_TEXT} AND owner = :owner AND conversation = :conversation", table="pa_memories"
)
"""An anonymous caller's (``owner`` empty) rows of a text in its one conversation."""


def memory_id(text: str) -> str:
    """A remembered item's id for the tools: 8 hex digits of its text's SHA-256 (the same
    text has the same id wherever it is kept, and forgetting the id forgets every copy)."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


@dataclass(frozen=True, slots=True)
class Found:
    """One remembered item a search found: its id, its text marked with who said it to
    whom, and the persona whose memory holds it."""

    id: str
    marked: str
    text: str
    persona_id: str


class SharedMemory(TurnMemory):
    """:class:`PersonaMemory` (its store, embedder and the hub's defaults) with each
    persona's ``memory`` settings, sharing, the tools' operations, spans and metrics."""

    embedder: Embedder

    def __init__(
        self, memory: PersonaMemory, writer: GroupCommitWriter, *, metrics: HubMetrics = NO_METRICS
    ) -> None:
        self.memory = memory
        self.embedder = memory.embedder
        self.metrics = metrics
        self._writer = writer
        self._lookup: Callable[[str], Persona | None] = lambda persona_id: None

    def find_personas(self, lookup: Callable[[str], Persona | None]) -> None:
        self._lookup = lookup

    def scope(self, persona: Persona, owner: str, conversation: str) -> MemoryScope | None:
        """The persona's memory of the caller, with the personas it shares memory with:
        those it names in ``memory.shared_with`` that are served, remember, and name it
        back (sharing takes both files' word)."""
        settings = persona.memory
        if not settings.enabled:
            return None
        shared = tuple(
            peer.id
            for peer in map(self._lookup, settings.shared_with)
            if peer is not None and peer.memory.enabled and persona.id in peer.memory.shared_with
        )
        return MemoryScope(
            persona.id, owner, conversation, shared, settings.token_budget, settings.max_items
        )

    async def recall(
        self, scope: MemoryScope, message: str, in_prompt: Sequence[str], *, new: bool = False
    ) -> Recalled:
        """As :meth:`TurnMemory.recall`, in a span (``memory_search {persona}``) and
        counted; a failure (an embeddings endpoint down) is logged and recalls nothing.
        The memory of one new conversation (an anonymous caller's first turn) is empty:
        not searched (no embedding, no database read), a miss."""
        persona = scope.persona_id
        attributes: dict[str, Any] = {"persona_agent.persona.id": persona}
        if scope.shared:
            attributes["persona_agent.memory.shared_with"] = list(scope.shared)
        name = f"memory_search {persona}"
        with TRACER.start_as_current_span(name, attributes=attributes) as span:
            started = time.monotonic()
            left_out: list[tuple[Found, str]] = []
            try:
                found = (
                    []
                    if new and scope.conversation_only
                    else await self.search(
                        scope,
                        message,
                        token_budget=_given(scope.token_budget, self.memory.token_budget),
                        max_items=_given(scope.max_items, self.memory.max_items),
                        exclude=in_prompt,
                        left_out=left_out,
                    )
                )
            except Exception as error:
                logger.exception("persona %s: memory could not be searched", persona)
                self.metrics.memory_searches.labels(persona, "error").inc()
                span.record_exception(error)
                span.set_attribute("persona_agent.memory.outcome", "error")
                return Recalled()
            took = time.monotonic() - started
            tokens = sum(estimate_tokens(item.marked) for item in found)
            outcome = "hit" if found else "miss"
            self.metrics.memory_searches.labels(persona, outcome).inc()
            self.metrics.memory_search_seconds.labels(persona).observe(took)
            if found:
                self.metrics.memory_recalled_items.labels(persona).inc(len(found))
                self.metrics.memory_recalled_tokens.labels(persona).inc(tokens)
            span.set_attributes(
                {
                    "persona_agent.memory.outcome": outcome,
                    "persona_agent.memory.hits": len(found),
                    "persona_agent.memory.tokens": tokens,
                }
            )
        return Recalled(
            (item.marked for item in found), ((item.marked, why) for item, why in left_out)
        )

    async def aclose(self) -> None:
        """Stop the memory's background work (re-embedding)."""
        await self.memory.aclose()

    async def keep(self, scope: MemoryScope, said: Sequence[dict[str, Any]]) -> None:
        """The turn's messages, in the persona's own memory (never a sharing persona's);
        not a turn that forgot something ("forget all about Biscuit" is not to be
        remembered, nor the answer that names what it forgot)."""
        if any(_calls(message, "forget") for message in said):
            return
        await self.memory.keep(scope.of(scope.persona_id), said)

    async def search(
        self,
        scope: MemoryScope,
        query: str,
        *,
        token_budget: int,
        max_items: int,
        exclude: Sequence[str] = (),
        left_out: list[tuple[Found, str]] | None = None,
    ) -> list[Found]:
        """The items of the scope's memory (the persona's, and the sharing personas' of the
        same caller) most relevant to ``query``, as :func:`select_remembered` chooses them;
        ``left_out``, when given, receives those its budgets left out, each with why.

        Raises:
            Exception: the embedder failed.
        """
        if not query.strip():
            return []
        excluded = frozenset(text.strip()[:MAX_REMEMBERED_CHARS] for text in exclude)
        dropped: list[tuple[Remembered, str]] | None = None if left_out is None else []
        budgets = {"token_budget": token_budget, "max_items": max_items, "exclude": excluded}
        if scope.shared:
            chosen, whose = await self._ranked_together(scope, query, budgets, dropped)
        else:
            chosen, whose = await self._ranked_own(scope, query, budgets, dropped)
        if left_out is not None and dropped:
            reader = scope.persona_id
            left_out += [(self._found(item, whose(item), reader), why) for item, why in dropped]
        return [self._found(item, whose(item), scope.persona_id) for item in chosen]

    async def _ranked_own(
        self,
        scope: MemoryScope,
        query: str,
        budgets: dict[str, Any],
        dropped: list[tuple[Remembered, str]] | None,
    ) -> tuple[list[Remembered], Callable[[Remembered], str]]:
        """The persona's own memory, searched in its cached index: the items chosen, and
        whose each is (the persona's)."""
        embedder = self.memory.embedder
        query_vector, (index, lock) = await asyncio.gather(
            embedder.embed([query], query=True),
            self.memory.store.index(scope, embedder.name),
        )
        if not len(index):
            return [], lambda item: scope.persona_id
        async with lock:  # a concurrent turn of the scope may extend the index
            # A matrix product and the query words' postings: off the event loop.
            own = await asyncio.to_thread(
                search_index,
                index,
                query,
                query_vector[0],
                **budgets,
                near_duplicate=near_duplicate(embedder),
                left_out=dropped,
            )
        return own, lambda item: scope.persona_id

    async def _ranked_together(
        self,
        scope: MemoryScope,
        query: str,
        budgets: dict[str, Any],
        dropped: list[tuple[Remembered, str]] | None,
    ) -> tuple[list[Remembered], Callable[[Remembered], str]]:
        """The sharing personas' rows ranked together (indexed for this search alone): the
        items chosen, and whose memory holds each."""
        embedder = self.memory.embedder
        loaded = [
            (persona_id, *await self.memory.store.load(scope.of(persona_id), embedder.name))
            for persona_id in (scope.persona_id, *scope.shared)
        ]
        items: list[Remembered] = []
        vectors = []
        owners: dict[int, str] = {}
        for persona_id, rows, rows_vectors in loaded:
            if rows:
                items.extend(rows)
                vectors.append(rows_vectors)
                owners.update((id(row), persona_id) for row in rows)
        if not items:
            return [], lambda item: scope.persona_id
        query_vector = await embedder.embed([query], query=True)
        all_vectors = vectors[0] if len(vectors) == 1 else np.vstack(vectors)
        chosen = await asyncio.to_thread(  # linear in the rows: off the event loop
            select_remembered,
            query,
            query_vector[0],
            items,
            all_vectors,
            **budgets,
            near_duplicate=near_duplicate(embedder),
            left_out=dropped,
        )
        return chosen, lambda item: owners[id(item)]

    async def remember(self, scope: MemoryScope, fact: str) -> str:
        """Keep ``fact`` about the caller in the persona's own memory; the text kept.

        Raises:
            Exception: the embedder or the database failed.
        """
        text = " ".join(fact.split())[:MAX_FACT_CHARS]
        vectors = await self.memory.embedder.embed([text])
        own = scope.of(scope.persona_id)
        await self.memory.store.add(own, self.memory.embedder.name, [(FACT_ROLE, text)], vectors)
        return text

    async def forget(
        self, scope: MemoryScope, about: str = "", ids: Sequence[str] = ()
    ) -> list[Found]:
        """Delete the items of the scope's memory (the persona's and the sharing
        personas', of this caller alone) whose id is in ``ids``, or that hold every
        significant word of ``about``; the items deleted.

        Raises:
            Exception: the database failed.
        """
        wanted_words = set(words(about)) - _NAMES_NO_MEMORY
        wanted = {item.strip().lower() for item in ids if item.strip()}
        if not wanted_words and not wanted:
            return []
        embedder = self.memory.embedder
        forgotten: dict[tuple[str, str], Found] = {}
        for persona_id in (scope.persona_id, *scope.shared):
            rows, _ = await self.memory.store.load(scope.of(persona_id), embedder.name)
            for item in rows:
                hit = memory_id(item.text) in wanted or (
                    bool(wanted_words) and wanted_words <= set(words(item.text))
                )
                if hit:
                    found = self._found(item, persona_id, scope.persona_id)
                    forgotten.setdefault((persona_id, item.text), found)
        if forgotten:
            await self._delete(scope, list(forgotten.values()))
        return list(forgotten.values())

    async def _delete(self, scope: MemoryScope, items: list[Found]) -> None:
        """Every row of these texts in the caller's memory with their personas (whichever
        embedder made their vectors)."""
        if scope.owner:
            statement = _FORGET_OF_OWNER
            rows = [
                {"persona_id": item.persona_id, "text": item.text, "owner": scope.owner}
                for item in items
            ]
        else:
            statement = _FORGET_IN_CONVERSATION
            rows = [
                {
                    "persona_id": item.persona_id,
                    "text": item.text,
                    "owner": "",
                    "conversation": scope.conversation,
                }
                for item in items
            ]
        await self._writer.write(statement, rows)

    def _found(self, item: Remembered, persona_id: str, reader: str) -> Found:
        return Found(
            memory_id(item.text), self._marked(item, persona_id, reader), item.text, persona_id
        )

    def _marked(self, item: Remembered, persona_id: str, reader: str) -> str:
        """The item with who said it, as the reading persona sees it: its own memory's
        ("The user said", "You said", "Noted about the user") or a sharing persona's
        ("The user told Curie", "Curie said", "Curie noted about the user")."""
        if persona_id == reader:
            said = {"user": "The user said", "assistant": "You said"}
            who = said.get(item.role, "Noted about the user")
        else:
            peer = self._lookup(persona_id)
            name = peer.name if peer is not None else persona_id
            said = {"user": f"The user told {name}", "assistant": f"{name} said"}
            who = said.get(item.role, f"{name} noted about the user")
        return f"{who}: {item.text}"


def _calls(message: dict[str, Any], tool: str) -> bool:
    """Whether ``message`` is the model's call of ``tool``."""
    calls = message.get("tool_calls") or ()
    return any(call.get("function", {}).get("name") == tool for call in calls)


def _given(value: int | None, default: int) -> int:
    return default if value is None else value
