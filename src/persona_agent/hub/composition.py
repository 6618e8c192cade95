"""The hub: every part built from the settings in the order they start, and started and
closed through one AsyncExitStack (the composition root's one entry, :func:`build_hub`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from persona_agent.a2a.registry import A2ARegistry
from persona_agent.a2a.sdk_fixes.untraced import drop_idle_tracing
from persona_agent.chat.engine import ChatEngine
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.hub.a2a_parts import A2AParts, build_a2a
from persona_agent.hub.collaboration import Collaboration, build_collaboration
from persona_agent.hub.engine_part import build_engine_part
from persona_agent.hub.knowledge_part import build_knowledge_part
from persona_agent.hub.media_part import build_media
from persona_agent.hub.model_backend import ModelBackend, build_model_backend
from persona_agent.hub.personas_live import PersonasLive, build_personas_live
from persona_agent.hub.protection import Protection, build_protection
from persona_agent.hub.readiness import Readiness
from persona_agent.hub.storage import Storage, build_storage
from persona_agent.hub.telemetry import Telemetry, build_telemetry
from persona_agent.knowledge.library import Knowledge
from persona_agent.observe.metrics import HubMetrics
from persona_agent.settings import Settings

__all__ = ["Hub", "Part", "build_hub"]


class Part(Protocol):
    """A part of the hub with a life: started on entering ``running()``, closed on leaving."""

    def running(self) -> AbstractAsyncContextManager[None]: ...


@dataclass
class Hub:
    """Every part of the hub, as :func:`build_hub` built them from the settings.

    ``running()`` starts them in the order they were built (storage before what uses it),
    then the doors given to it (gRPC, MCP: they serve the parts), and closes each after
    every part started later is closed."""

    telemetry: Telemetry
    storage: Storage
    model: ModelBackend
    collaboration: Collaboration
    knowledge: Knowledge
    protection: Protection
    engine: ChatEngine
    conversations: ConversationStore
    """The stored conversations callers steer (the REST API's)."""
    a2a: A2AParts
    readiness: Readiness
    live: PersonasLive

    @property
    def metrics(self) -> HubMetrics:
        return self.telemetry.metrics

    @property
    def registry(self) -> A2ARegistry:
        """Every persona served, by id."""
        return self.a2a.registry

    def parts(self) -> list[Part]:
        """The parts with a life, in the order they start."""
        return [
            self.telemetry,
            self.storage,
            self.model,
            self.collaboration,
            self.protection,
            self.engine.summary,
            self.a2a,
            self.live,
        ]

    @asynccontextmanager
    async def running(self, *doors: Part) -> AsyncIterator[None]:
        """Start every part, then ``doors``; close them (those started) the other way round."""
        async with AsyncExitStack() as stack:
            for part in [*self.parts(), *doors]:
                await stack.enter_async_context(part.running())
            yield


def build_hub(settings: Settings) -> Hub:
    """The hub's parts, built in the order they start (storage first). Nothing starts
    here: :meth:`Hub.running` starts them.

    Raises:
        ConfigError: a setting, the persona directory or a configuration file is wrong
            (each builder says which).
    """
    telemetry = build_telemetry(settings)
    metrics = telemetry.metrics
    storage = build_storage(settings, metrics)
    model = build_model_backend(settings)
    collaboration = build_collaboration(settings, metrics)
    knowledge, documents = build_knowledge_part(settings, storage, model)
    media = build_media(settings, storage.writer, model.llm)
    protection = build_protection(settings)
    engine, conversations = build_engine_part(
        settings,
        model,
        storage,
        collaboration,
        metrics,
        knowledge,
        media.images,
        identifies_callers=protection.authenticator.enabled,
    )
    a2a = build_a2a(settings, engine, storage, collaboration, protection, metrics, media, documents)
    drop_idle_tracing()  # the SDK's server parts are loaded: no no-op span a call
    replica = storage.cluster.replica if storage.cluster is not None else None
    readiness = Readiness(storage.writer, a2a.registry, model.llm, replica=replica)
    live = build_personas_live(
        settings, storage, a2a, model.llm, collaboration, readiness, knowledge
    )
    return Hub(
        telemetry=telemetry,
        storage=storage,
        model=model,
        collaboration=collaboration,
        knowledge=knowledge,
        protection=protection,
        engine=engine,
        conversations=conversations,
        a2a=a2a,
        readiness=readiness,
        live=live,
    )
