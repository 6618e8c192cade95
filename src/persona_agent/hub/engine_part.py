"""The engine: one message answered as one persona (memory, summary, knowledge, images and
tools given to it), and the stored conversations callers steer, built from the settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_agent.chat.engine import ChatEngine
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.conversations.storage_quota import StorageLimits, StorageQuota
from persona_agent.hub.collaboration import Collaboration
from persona_agent.hub.memory_part import build_memory_part
from persona_agent.hub.model_backend import ModelBackend
from persona_agent.hub.storage import Storage
from persona_agent.llm.base import Usage
from persona_agent.llm.local.weights import LOCAL_MODEL_NAME
from persona_agent.observe.metrics import HubMetrics
from persona_agent.observe.pricing import load_prices
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.knowledge.library import Knowledge
    from persona_agent.media.turn_images import TurnImages

__all__ = ["build_conversations", "build_engine_part"]


def build_engine_part(
    settings: Settings,
    model: ModelBackend,
    storage: Storage,
    collaboration: Collaboration,
    metrics: HubMetrics,
    knowledge: Knowledge,
    images: TurnImages,
    *,
    identifies_callers: bool,
) -> tuple[ChatEngine, ConversationStore]:
    """The engine that answers one message as one persona (its life: the running
    summaries it makes in the background, :attr:`ChatEngine.summary`), and the stored
    conversations callers steer (:func:`build_conversations`: the engine's conversations,
    under its locks); ``images``: the media part's
    (:func:`~persona_agent.hub.media_part.build_media`); ``identifies_callers``: someone can
    authenticate to the hub."""
    cluster = storage.cluster
    locks = cluster.locks if cluster is not None else None
    prices = load_prices(settings.llm_prices, free=(LOCAL_MODEL_NAME,))
    usage = storage.usage

    async def record(persona_id: str, model_name: str, tokens: Usage) -> None:
        await usage.record(persona_id, model_name, tokens, prices.cost(model_name, tokens))

    memory = build_memory_part(settings, storage.writer, model, metrics, locks=locks, record=record)
    if settings.memory:  # the model may remember, recall and forget (docs/memory.md)
        from persona_agent.chat.memory_tools import MemoryTools
        from persona_agent.memory.shared import SharedMemory

        if isinstance(memory.memory, SharedMemory):
            collaboration.tools.sources.insert(0, MemoryTools(memory.memory))
    engine = ChatEngine(
        model.llm,
        storage.history,
        collaboration.tools,
        max_tool_iterations=settings.max_tool_iterations,
        locks=locks,
        prices=prices,
        usage=usage,
        metrics=metrics,
        memory=memory.memory,
        summary=memory.summary,
        knowledge=knowledge,
        users=storage.user_personas,
        prompts=storage.prompts,
        images=images,
    )
    return engine, build_conversations(
        settings, storage, engine, identifies_callers=identifies_callers
    )


def build_conversations(
    settings: Settings, storage: Storage, engine: ChatEngine, *, identifies_callers: bool
) -> ConversationStore:
    """The stored conversations callers steer, each caller within its storage quota
    (anonymous conversations too, on a hub that ``identifies_callers``)."""
    limits = StorageLimits(
        conversations=settings.caller_max_conversations,
        messages=settings.caller_max_messages,
        bytes=settings.caller_max_message_bytes,
        anonymous_is_a_caller=identifies_callers,
    )
    quota = StorageQuota(storage.writer, limits)
    return ConversationStore(storage.writer, storage.history, locks=engine.locks, quota=quota)
