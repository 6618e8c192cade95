"""The hub's serving parts, built last: A2A (the registry of every persona, its services and
the calls between personas) and the personas live (loaded, followed, swept).

As :mod:`.assembly`'s parts, each returns from its builder and starts and closes in the
app's lifespan, after (and before) the parts it uses.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from persona_agent.a2a.cards import A2A_PREFIX, provider
from persona_agent.a2a.image_parts import ImageIntake
from persona_agent.a2a.push import PushParts
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.a2a.services import HubServices
from persona_agent.api.assembly import Collaboration, Protection, Storage, image_limits
from persona_agent.api.pages import CONSOLE_PATH
from persona_agent.api.readiness import Readiness
from persona_agent.api.rest_auth import is_loopback
from persona_agent.api.webhooks import build_push
from persona_agent.chat.budget import BudgetLimits
from persona_agent.chat.engine import ChatEngine
from persona_agent.collab.consultation import Consultations
from persona_agent.collab.local_calls import LocalCalls
from persona_agent.collab.panel_executor import PanelExecutor
from persona_agent.collab.panel_prompts import warn_panel_problems
from persona_agent.errors import ConfigError
from persona_agent.knowledge.folders import DocumentFolders
from persona_agent.knowledge.library import Knowledge
from persona_agent.knowledge.reader_pool import READ_IN_THREAD, DocumentReader
from persona_agent.knowledge.sent_documents import DocumentBudget
from persona_agent.llm.base import LLMBackend
from persona_agent.media.vision import Vision
from persona_agent.memory.scope import TurnMemory
from persona_agent.observe.metrics import HubMetrics
from persona_agent.parts import (
    build_speech,
    prepare_llm_backend,
    read_limits,
    warn_unknown_agents,
    warn_unknown_tool_servers,
)
from persona_agent.personas.file_store import FilePersonaStore
from persona_agent.personas.model import Persona
from persona_agent.personas.watcher import watch_personas
from persona_agent.retention import Retention, RetentionLimits
from persona_agent.security.push_urls import PushUrlGuard
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.cluster.notify import Listener
    from persona_agent.personas.sql_store import SqlPersonaStore

__all__ = ["A2AParts", "PersonasLive", "build_a2a", "build_personas_live"]

logger = logging.getLogger(__name__)

PUSH_CHANNEL = "pa_push_configs"
"""Replicas: notified with a task id when a push config is set for it."""

UNFINISHED_REASON = "The server stopped before this task finished; send the message again."


@dataclass
class A2AParts:
    """Every persona served over A2A (the registry), with what serves them all.

    Started: a replica joins the cluster (push configs and cancels heard from the others,
    its lease taken) and imports the persona directory; a single hub fails the tasks an
    earlier run left unfinished. Closed: running tasks finish (or are canceled), then the
    replica leaves, then queued webhooks are delivered."""

    registry: A2ARegistry
    services: HubServices
    push: PushParts | None
    storage: Storage
    personas_dir: Path
    memory: TurnMemory

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if self.push is not None:
                stack.push_async_callback(self.push.aclose)
            await self._join(stack)
            stack.push_async_callback(self.memory.aclose)  # its background work, once idle
            stack.push_async_callback(self.services.speech.aclose)  # after the tasks
            stack.push_async_callback(self.services.documents.reader.aclose)  # after them too
            stack.callback(self.services.images.close)  # after the tasks too
            stack.push_async_callback(self.registry.aclose)
            yield

    async def _join(self, stack: AsyncExitStack) -> None:
        storage, push = self.storage, self.push
        cluster, sql_personas = storage.cluster, storage.sql_personas
        if cluster is None or sql_personas is None:
            marked = await storage.lean_store.fail_unfinished(UNFINISHED_REASON)
            if marked:
                logger.warning("Marked %d unfinished task(s) from an earlier run as failed", marked)
            return
        if push is not None:
            await cluster.listener.listen(PUSH_CHANNEL, push.store.heard)
        await cluster.start(self.registry.canceled_elsewhere)
        stack.push_async_callback(cluster.aclose)  # its tasks are done: the lease goes
        await _import_personas(self.personas_dir, sql_personas, cluster.listener)


def build_a2a(
    settings: Settings,
    engine: ChatEngine,
    storage: Storage,
    collaboration: Collaboration,
    protection: Protection,
    metrics: HubMetrics,
    reader: DocumentReader = READ_IN_THREAD,
) -> A2AParts:
    """The registry and its services; the consultations of other personas become the
    first of the engine's tool sources (before MCP: it takes every other name).
    ``reader``: who reads the documents of messages (the hub's reader processes, closed
    here once the tasks are)."""
    cluster = storage.cluster
    push = (
        build_push(
            settings,
            storage.db,
            announce=(
                functools.partial(cluster.announce, PUSH_CHANNEL) if cluster is not None else None
            ),
            metrics=metrics,
        )
        if settings.push_notifications
        else None
    )
    services = _services(
        settings, storage, protection, push, metrics, engine.images.vision, engine.llm, reader
    )

    def panel_executor(persona: Persona) -> PanelExecutor:
        return PanelExecutor(
            persona,
            local_calls,
            registry.persona,
            audit=services.audit,
            quotas=services.quotas,
            metrics=services.metrics,
            budget=services.budget,
            documents=services.documents,
            demo_model=engine.llm.demo_model,
        )

    registry = A2ARegistry(
        engine=engine,
        task_store=storage.task_store,
        base_url=settings.base_url,
        max_message_bytes=settings.max_message_bytes,
        shutdown_grace_period=settings.shutdown_grace_seconds,
        task_listing=settings.task_listing,
        max_id_length=settings.max_id_length,
        services=services,
        panel_executors=panel_executor,
    )
    # Messages to the hub's own personas from within it (consultations, panels).
    local_calls = LocalCalls(registry.local_handler)
    metrics.count_personas(lambda: len(registry))
    consultations = Consultations(
        local_calls, registry.persona, registry.personas, max_depth=settings.consult_depth
    )
    collaboration.tools.sources.insert(0, consultations)
    engine.memory.find_personas(registry.persona)  # personas sharing memory find each other
    return A2AParts(registry, services, push, storage, settings.personas_dir, engine.memory)


def _services(
    settings: Settings,
    storage: Storage,
    protection: Protection,
    push: PushParts | None,
    metrics: HubMetrics,
    vision: Vision,
    llm: LLMBackend,
    reader: DocumentReader,
) -> HubServices:
    cluster = storage.cluster
    return HubServices(
        authenticator=protection.authenticator,
        quotas=protection.quotas,
        audit=protection.audit,
        signer=protection.signer,
        push=push,
        avatars=storage.personas.avatar,
        stream_idle_seconds=settings.stream_idle_seconds,
        log_fields=settings.log_format == "json",
        provider=provider(
            settings.provider_organization, settings.provider_url or settings.base_url
        ),
        event_stream=cluster.events if cluster is not None else None,
        metrics=metrics,
        budget=BudgetLimits(
            model_calls=settings.request_budget_model_calls,
            tool_calls=settings.request_budget_tool_calls,
        ),
        vision=vision,
        images=ImageIntake(
            image_limits(settings),
            PushUrlGuard(settings.image_url_allowed_host_list),
            workers=settings.image_workers,
        ),
        max_message_parts=settings.max_message_parts,
        documents=document_budget(settings, llm, reader),
        speech=build_speech(settings),
    )


def document_budget(
    settings: Settings, llm: LLMBackend, reader: DocumentReader = READ_IN_THREAD
) -> DocumentBudget:
    """The tokens a message's documents show the model: ``document_tokens``, and, for a
    backend that says what a prompt may take (the embedded model: its context less its
    answer), no more than a quarter of that in tokens of 4 characters: digits and
    punctuation take up to twice as many on its tokenizer (2 characters a token), so the
    documents fill at most half the prompt, the other half the persona and the conversation."""
    tokens = settings.document_tokens
    if llm.prompt_tokens is not None:
        tokens = min(tokens, llm.prompt_tokens // 4)
    return DocumentBudget(tokens, read_limits(settings), reader)


async def _import_personas(directory: Path, store: SqlPersonaStore, listener: Listener) -> None:
    """Replicas: import the persona directory's files into the database (a file already
    imported, unchanged, is left alone), then load every persona and follow changes."""
    if await asyncio.to_thread(directory.is_dir):
        errors = await store.import_directory(directory)
        if errors:
            raise ConfigError(
                f"{len(errors)} invalid persona file(s):\n" + "\n".join(f"  {e}" for e in errors)
            )
    await store.start(listener)


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

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self._load()
        store, persona_data = self.storage.personas, self.storage.persona_data
        async with AsyncExitStack() as stack:
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
            _log_startup(self.settings, self.llm, self.registry)
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

    async def _load(self) -> None:
        """Every persona in the registry, the configuration's problems named, the model
        backend readied."""
        personas = await self.storage.personas.list()
        for persona in personas:
            self.registry.put(persona)
        warn_unknown_tool_servers(personas, self.collaboration.tool_servers())
        collaboration = self.collaboration
        warn_unknown_agents(personas, collaboration.agent_names(), collaboration.catalog_agent)
        warn_panel_problems(personas)
        await prepare_llm_backend(self.llm, personas, preload=self.settings.local_preload)
        self.readiness.personas_loaded = True


async def _awaited(task: asyncio.Task[None]) -> None:
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
        prune=[a2a.push.store.prune] if a2a.push is not None else [],
    )
    return PersonasLive(
        settings, storage, a2a.registry, llm, collaboration, readiness, retention, knowledge
    )


def _log_startup(settings: Settings, llm: LLMBackend, registry: A2ARegistry) -> None:
    logger.info("Serving %d persona(s) at %s%s/{id}/", len(registry), settings.base_url, A2A_PREFIX)
    if settings.console:
        logger.info("Web console: %s%s/", settings.base_url, CONSOLE_PATH)
    auth = registry.services.auth  # None when nobody can authenticate
    if auth is None:
        if not is_loopback(settings.host):
            logger.warning(
                "No API keys or OIDC issuer are configured and the hub listens on %s: every "
                "persona answers anyone over A2A, /api/v1 reads are open and every write is "
                "refused. Set PERSONA_AGENT_API_KEYS (docs/security.md).",
                settings.host,
            )
        else:  # the default start: open to this machine alone, nothing to warn of
            logger.info(
                "Open to this machine: no API keys, so /api/v1 writes are taken only from "
                "loopback (no other origin); set PERSONA_AGENT_API_KEYS to require a key "
                "(docs/security.md)"
            )
    else:
        logger.info(
            "A2A access: %s by default (a persona's access: overrides); /api/v1 needs credentials",
            auth.default_access,
        )
    _log_memory(settings.memory, identifies=auth is not None)
    if llm.name == "local":
        logger.info(
            "LLM backend: local, the embedded model %s%s (no key needed; set "
            "PERSONA_AGENT_LLM_BASE_URL to use an OpenAI-compatible server: docs/local-model.md)",
            llm.default_model,
            f" from {llm.where}" if llm.where else "",
        )
    else:
        where = f" at {llm.where}" if llm.where else ""
        logger.info("LLM backend: %s%s, model %s", llm.name, where, llm.default_model)


def _log_memory(on: bool, identifies: bool) -> None:
    """Say, when memory is on, whom it is for: a hub that identifies nobody remembers
    within one conversation only (docs/memory.md)."""
    if not on:
        return
    if identifies:
        logger.info(
            "Memory is on: a caller with an API key or OIDC token is remembered across its "
            "conversations, an anonymous caller within one conversation (docs/memory.md)"
        )
    else:
        logger.info(
            "Memory is on, within one conversation at a time: no API keys or OIDC issuer "
            "are configured, so every caller is anonymous and a new conversation remembers "
            "nothing of the last (set PERSONA_AGENT_API_KEYS: docs/memory.md)"
        )
