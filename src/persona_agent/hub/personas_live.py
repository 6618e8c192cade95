"""The personas live: put in the registry and the model backend readied at start, then every
change applied as it comes, a deleted persona's data deleted and old tasks swept."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from persona_agent.a2a.registry import A2ARegistry
from persona_agent.collab.panel_prompts import warn_panel_problems
from persona_agent.hub.a2a_parts import A2AParts
from persona_agent.hub.collaboration import (
    Collaboration,
    warn_unknown_agents,
    warn_unknown_tool_servers,
)
from persona_agent.hub.model_backend import prepare_llm_backend, warm_personas
from persona_agent.hub.readiness import Readiness
from persona_agent.hub.storage import Storage
from persona_agent.knowledge.folders import DocumentFolders
from persona_agent.knowledge.library import Knowledge
from persona_agent.llm.base import LLMBackend
from persona_agent.personas.model import Persona
from persona_agent.personas.stores.file_store import FilePersonaStore
from persona_agent.personas.stores.watcher import watch_personas
from persona_agent.retention import Retention, RetentionLimits
from persona_agent.settings import Settings

__all__ = ["PersonasLive", "build_personas_live"]


@dataclass
class PersonasLive:
    """The personas served, live: put in the registry and the model backend readied at
    start, then every change applied as it comes (REST, CLI, the watched directory, other
    replicas), a deleted persona's data deleted, and old tasks swept."""

    settings: Settings
    storage: Storage
    registry: A2ARegistry
    llm: LLMBackend
    collaboration: Collaboration
    readiness: Readiness
    retention: Retention
    knowledge: Knowledge
    warming: asyncio.Task[None] | None = None
    """The personas' prefixes warmed in the background (:func:`warm_personas`), once started."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        personas = await self._load()
        store, persona_data = self.storage.personas, self.storage.persona_data
        async with AsyncExitStack() as stack:
            # Ready without it: the prefixes are warmed in the background, cancelled at
            # shutdown (after the persona being read).
            self.warming = asyncio.create_task(warm_personas(self.llm, personas, self.settings))
            stack.push_async_callback(_cancelled, self.warming)
            stack.push_async_callback(persona_data.aclose)
            stack.push_async_callback(self.knowledge.aclose)  # its background re-embedding
            # The registry hears each change first, then the deleted persona's data goes.
            unsubscribe = store.subscribe(self.registry.apply)
            stack.callback(store.subscribe(persona_data.on_change))
            stack.callback(unsubscribe)
            stop_watching = asyncio.Event()
            sweeping = self.retention.run(stop_watching, self.settings.retention_interval)
            stack.push_async_callback(_awaited, asyncio.create_task(sweeping))
            if isinstance(store, FilePersonaStore):
                self._documents_folders(store, stack, stop_watching)
            if self.settings.watch_personas and isinstance(store, FilePersonaStore):
                stack.push_async_callback(
                    _awaited, asyncio.create_task(watch_personas(store, stop_watching))
                )
            stack.callback(stop_watching.set)
            yield

    def _documents_folders(
        self, store: FilePersonaStore, stack: AsyncExitStack, stop: asyncio.Event
    ) -> None:
        """The personas' documents folders (``<id>.documents/``) taken in, then followed
        with the persona files: in the background, so that start-up does not wait for
        documents to be embedded."""
        registry = self.registry
        folders = DocumentFolders(
            self.knowledge,
            store.directory,
            lambda persona_id: persona_id in registry,
            watch=self.settings.watch_personas,
        )
        stack.push_async_callback(folders.aclose)
        stack.callback(store.subscribe(folders.on_change))
        stack.push_async_callback(_awaited, asyncio.create_task(folders.run(stop)))

    async def _load(self) -> list[Persona]:
        """Every persona in the registry (returned), the configuration's problems named, the
        model backend readied."""
        personas = await self.storage.personas.list()
        for persona in personas:
            self.registry.put(persona)
        warn_unknown_tool_servers(personas, self.collaboration.tool_servers())
        collaboration = self.collaboration
        warn_unknown_agents(personas, collaboration.agent_names(), collaboration.catalog_agent)
        warn_panel_problems(personas)
        await prepare_llm_backend(self.llm, personas, preload=self.settings.local_preload)
        self.readiness.personas_loaded = True
        return personas


async def _awaited(task: asyncio.Task[None]) -> None:
    await task


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def build_personas_live(
    settings: Settings,
    storage: Storage,
    a2a: A2AParts,
    llm: LLMBackend,
    collaboration: Collaboration,
    readiness: Readiness,
    knowledge: Knowledge,
) -> PersonasLive:
    retention = Retention(
        storage.writer,
        RetentionLimits(
            task_max_age_days=settings.retention_task_days,
            task_max_count=settings.retention_task_count,
            task_max_bytes=settings.retention_task_bytes,
            message_max_count=settings.retention_message_count,
            message_max_bytes=settings.retention_message_bytes,
            memory_max_age_days=settings.retention_memory_days,
            caller_message_max_count=settings.caller_max_messages,
            caller_message_max_bytes=settings.caller_max_message_bytes,
            anonymous_is_a_caller=a2a.registry.services.auth is not None,
        ),
        # Push configs of the tasks deleted; prompt records of the messages deleted.
        prune=[*([a2a.push.store.prune] if a2a.push is not None else []), storage.prompts.prune],
    )
    return PersonasLive(
        settings, storage, a2a.registry, llm, collaboration, readiness, retention, knowledge
    )
