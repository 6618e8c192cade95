"""Memory: what personas remember of their callers, the running summaries, the memory
records the REST API manages, built from the settings."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persona_agent.errors import ConfigError
from persona_agent.hub.model_backend import ModelBackend, is_local
from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, Usage
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.db import GroupCommitWriter
    from persona_agent.memory.embeddings import Embedder
    from persona_agent.memory.records import MemoryRecords
    from persona_agent.memory.scope import TurnMemory
    from persona_agent.memory.summary import Complete, ConversationSummary, Locks
    from persona_agent.observe.metrics import HubMetrics

__all__ = [
    "MemoryPart",
    "build_memory",
    "build_memory_part",
    "build_memory_records",
    "build_summary",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemoryPart:
    """What the engine remembers, built once: of callers, and of what leaves a
    conversation's window."""

    memory: TurnMemory
    summary: ConversationSummary
    """Made in the background: started and closed with the hub's parts
    (:meth:`~persona_agent.hub.composition.Hub.parts`)."""


def build_memory_part(
    settings: Settings,
    writer: GroupCommitWriter,
    model: ModelBackend,
    metrics: HubMetrics,
    *,
    locks: Locks | None,
    record: Callable[[str, str, Usage], Awaitable[None]],
) -> MemoryPart:
    """The memory (:func:`build_memory`) and the running summary (:func:`build_summary`)
    of the settings, on ``model``'s embedder and LLM.

    Raises:
        ConfigError: as :func:`build_memory` and :func:`build_summary`.
    """
    return MemoryPart(
        build_memory(settings, writer, model.embedder, metrics),
        build_summary(settings, writer, model.llm, locks=locks, record=record, metrics=metrics),
    )


def build_memory(
    settings: Settings,
    writer: GroupCommitWriter,
    embedder: Callable[[], Embedder],
    metrics: HubMetrics,
) -> TurnMemory:
    """What personas remember of their callers: nothing unless ``memory`` is on. The
    memory modules (numpy, an embedding model: ``embedder()``) are imported only then: an
    idle hub without memory does not pay for them.

    Raises:
        ConfigError: ``openai`` embeddings without the ``openai`` LLM backend.
    """
    from persona_agent.memory.scope import NO_MEMORY

    if not settings.memory:
        return NO_MEMORY
    from persona_agent.memory.recall import PersonaMemory
    from persona_agent.memory.remembered import MemoryStore
    from persona_agent.memory.shared import SharedMemory

    memory = PersonaMemory(
        MemoryStore(writer, cache_bytes=settings.memory_cache_bytes),
        embedder(),
        token_budget=settings.memory_token_budget,
        max_items=settings.memory_max_items,
    )
    return SharedMemory(memory, writer, metrics=metrics)


def build_summary(
    settings: Settings,
    writer: GroupCommitWriter,
    llm: LLMBackend,
    *,
    locks: Locks | None = None,
    record: Callable[[str, str, Usage], Awaitable[None]] | None = None,
    metrics: HubMetrics | None = None,
) -> ConversationSummary:
    """The running summary of what leaves conversations' windows: with memory on, made by
    the model ``memory_summary_model`` names (by default the persona's own) on the
    ``openai`` backend; none with the embedded model, too small to summarize well
    (docs/memory.md). ``locks``: the engine's, when they span replicas; ``record``: where
    each summary's tokens go (the usage log); ``metrics``: where its model calls are
    counted (each is also a ``chat {model}`` span, as a turn's).

    Raises:
        ConfigError: a summary model named with the embedded model.
    """
    from persona_agent.memory.summary import NO_SUMMARY

    chosen = settings.memory_summary_model.strip()
    if not settings.memory or chosen == "off":
        return NO_SUMMARY
    if is_local(llm):
        if chosen:
            raise ConfigError(
                "PERSONA_AGENT_MEMORY_SUMMARY_MODEL needs the openai LLM backend "
                "(PERSONA_AGENT_LLM_BASE_URL): the embedded model makes no summary; "
                "leave it empty or set it to off"
            )
        return NO_SUMMARY
    from persona_agent.conversations.summary_store import SummaryStore
    from persona_agent.memory.summary import RunningSummary
    from persona_agent.observe.metrics import NO_METRICS

    return RunningSummary(
        SummaryStore(writer),
        _completion(llm, record, metrics if metrics is not None else NO_METRICS),
        max_messages=settings.history_max_messages,
        token_budget=settings.memory_summary_tokens,
        model=chosen or None,
        locks=locks,
    )


def _completion(
    llm: LLMBackend,
    record: Callable[[str, str, Usage], Awaitable[None]] | None,
    metrics: HubMetrics,
) -> Complete:
    """One request to ``llm`` for its whole answer (the summary), its tokens recorded, in
    a span of its own and counted in ``metrics`` (as a turn's model call)."""
    from persona_agent.llm.observed import observed_stream

    async def complete(
        persona_id: str, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> str:
        request = ChatRequest(
            messages=messages, model=model, temperature=0.2, max_tokens=max_tokens, whole=True
        )
        text: list[str] = []
        end = StreamEnd()
        stream = observed_stream(llm, request, model, metrics, purpose="summary")
        async with aclosing(stream) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta):
                    text.append(chunk.text)
                elif isinstance(chunk, StreamEnd):
                    end = chunk
        if record is not None:
            try:
                await record(persona_id, model, end.usage)
            except Exception:  # the summary is made all the same
                logger.exception("persona %s: a summary's tokens could not be recorded", persona_id)
        return "".join(text)

    return complete


def build_memory_records(writer: GroupCommitWriter, memory: TurnMemory) -> MemoryRecords:
    """The callers' memories as records the REST API manages, searched and edited with
    the embedder of the chat engine's ``memory`` (none when memory is off: numpy and the
    model stay unloaded)."""
    from persona_agent.memory.records import MemoryRecords

    return MemoryRecords(writer, memory.embedder)
