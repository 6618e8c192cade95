"""A2A: every persona served (the registry), its services, push notifications and the calls
between personas, built from the settings; started, a replica joins the cluster."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from persona_agent.a2a.cards import provider
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.a2a.services import HubServices
from persona_agent.a2a.tasks.push import (
    ConfigLimits,
    DeliveryLimits,
    IndexedConfigStore,
    PushParts,
    RetryingPushSender,
)
from persona_agent.a2a.tasks.task_store import persona_owner
from persona_agent.chat.budget import BudgetLimits
from persona_agent.chat.engine import ChatEngine
from persona_agent.collab.consultation import Consultations
from persona_agent.collab.local_calls import LocalCalls
from persona_agent.collab.panel_executor import PanelExecutor
from persona_agent.errors import ConfigError
from persona_agent.hub.collaboration import Collaboration
from persona_agent.hub.media_part import Media
from persona_agent.hub.protection import Protection
from persona_agent.hub.storage import Storage
from persona_agent.knowledge.sent_documents import DocumentBudget
from persona_agent.memory.scope import TurnMemory
from persona_agent.observe.metrics import HubMetrics
from persona_agent.personas.model import Persona
from persona_agent.security.egress.push_urls import PushUrlGuard
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.cluster.notify import Listener
    from persona_agent.db import GroupCommitWriter
    from persona_agent.personas.stores.sql_store import SqlPersonaStore

__all__ = ["PUSH_CHANNEL", "UNFINISHED_REASON", "A2AParts", "build_a2a", "build_push"]

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
    media: Media,
    documents: DocumentBudget,
) -> A2AParts:
    """The registry and its services; the consultations of other personas become the
    first of the engine's tool sources (before MCP: it takes every other name).
    ``media``: the images taken in and the spoken answers; ``documents``: what a message's
    documents may show the model, and who reads them (the hub's reader processes, closed
    here once the tasks are)."""
    cluster = storage.cluster
    push = (
        build_push(
            settings,
            storage.writer,
            announce=(
                functools.partial(cluster.announce, PUSH_CHANNEL) if cluster is not None else None
            ),
            metrics=metrics,
        )
        if settings.push_notifications
        else None
    )
    services = _services(settings, storage, protection, push, metrics, media, documents)

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
    media: Media,
    documents: DocumentBudget,
) -> HubServices:
    cluster = storage.cluster
    return HubServices(
        authenticator=protection.authenticator,
        quotas=protection.quotas,
        audit=protection.audit,
        signer=protection.signer,
        push=push,
        avatars=storage.personas.avatar,
        assets=storage.persona_assets.get,
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
        vision=media.images.vision,
        images=media.intake,
        max_message_parts=settings.max_message_parts,
        documents=documents,
        speech=media.speech,
    )


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


class _OnDemandTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, made for the first webhook call: making it imports httpcore
    and reads the CA bundle (about 3 MB, and 40 ms: in a worker thread), which a hub whose
    tasks have no webhook never needs."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._made: httpx.AsyncHTTPTransport | None = None
        self._making = asyncio.Lock()

    async def _transport(self) -> httpx.AsyncHTTPTransport:
        if self._made is None:
            async with self._making:
                if self._made is None:
                    self._made = await asyncio.to_thread(
                        httpx.AsyncHTTPTransport, limits=self._limits
                    )
        return self._made

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await (await self._transport()).handle_async_request(request)

    async def aclose(self) -> None:
        if self._made is not None:
            await self._made.aclose()


def build_push(
    settings: Settings,
    writer: GroupCommitWriter,
    *,
    announce: Callable[[str], Awaitable[None]] | None,
    metrics: HubMetrics,
) -> PushParts:
    """Configs in the hub's database, written by ``writer`` (durable, owned as tasks are,
    capped); webhooks guarded, and called per destination by a client of their own that
    follows no redirect. ``announce``: replicas, tell the others of a task given a config."""
    store = IndexedConfigStore(
        writer,
        encryption_key=settings.push_config_key,
        owner_resolver=persona_owner,
        announce=announce,
        limits=ConfigLimits(
            per_task=settings.push_max_configs_per_task,
            per_caller=settings.push_max_configs_per_caller,
        ),
    )
    # A connection for each destination's worker: the pool never makes one destination
    # wait for another's.
    destinations = settings.push_max_destinations
    limits = httpx.Limits(max_connections=destinations, max_keepalive_connections=20)
    http = httpx.AsyncClient(
        timeout=10, follow_redirects=False, transport=_OnDemandTransport(limits)
    )
    guard = PushUrlGuard(settings.push_allowed_host_list)
    sender = RetryingPushSender(
        http,
        store,
        push_url_validator=guard,
        limits=DeliveryLimits(
            per_destination=settings.push_queue_per_destination,
            destinations=destinations,
            queued_bytes=settings.push_queue_bytes,
        ),
        metrics=metrics,
    )
    return PushParts(store, sender, guard, http)
