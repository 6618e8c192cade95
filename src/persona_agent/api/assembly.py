"""The hub's parts below A2A, each built from the settings, and how each starts and closes:
telemetry, storage, the model backend, collaboration's tool sources, the engine, protection.

Each builder returns a part; the app's lifespan enters every part's ``running()`` in the
order ``create_app`` built them, so each closes after every part built later (which may
use it) is closed.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.task_store import SqlTaskStore
from persona_agent.api.persona_data import DeletedPersonaData
from persona_agent.api.rest_auth import ApiAuth
from persona_agent.chat.engine import ChatEngine
from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.tools import MCPTools, ToolSource, ToolSources
from persona_agent.chat.usage_log import UsageLog
from persona_agent.conversations.user_persona import UserPersonas
from persona_agent.db import GroupCommitWriter, create_engine
from persona_agent.errors import ConfigError
from persona_agent.hub.knowledge_part import build_document_reader, build_knowledge
from persona_agent.hub.memory_part import build_memory, build_summary
from persona_agent.hub.model_backend import build_embedder, build_llm_backend
from persona_agent.hub.protection import build_authenticator
from persona_agent.hub.storage import open_persona_store, persona_limits
from persona_agent.knowledge.document_store import KnowledgeStore
from persona_agent.llm.base import LLMBackend, Usage
from persona_agent.llm.local.weights import LOCAL_MODEL_NAME
from persona_agent.media.images import ImageLimits
from persona_agent.media.media_store import MediaStore
from persona_agent.media.turn_images import TurnImages
from persona_agent.media.vision import Vision
from persona_agent.migrations import prepare_db
from persona_agent.observe.metrics import HubMetrics
from persona_agent.observe.pricing import load_prices
from persona_agent.observe.tracing import start_tracing
from persona_agent.personas.store import PersonaStore
from persona_agent.security.audit import AuditLog
from persona_agent.security.authentication import Authenticator
from persona_agent.security.card_signing import CardSigner
from persona_agent.security.quotas import QuotaLimits, Quotas
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from persona_agent.cluster import Cluster
    from persona_agent.cluster.tasks import ClusterTaskStore
    from persona_agent.collab.agent_tools import RemoteAgents
    from persona_agent.knowledge.library import Knowledge
    from persona_agent.mcp.toolbox import MCPToolbox
    from persona_agent.memory.embeddings import Embedder
    from persona_agent.personas.sql_store import SqlPersonaStore

__all__ = [
    "Collaboration",
    "ModelBackend",
    "Part",
    "Protection",
    "Storage",
    "Telemetry",
    "build_collaboration",
    "build_engine",
    "build_knowledge_part",
    "build_model_backend",
    "build_protection",
    "build_storage",
    "build_telemetry",
    "load_personas",
]


class Part(Protocol):
    """A part of the hub with a life: started on entering ``running()``, closed on leaving."""

    def running(self) -> AbstractAsyncContextManager[None]: ...


@dataclass
class Telemetry:
    """Metrics, and traces when the ``OTEL_*`` environment asks for them."""

    metrics: HubMetrics
    tracer_provider: TracerProvider | None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self.tracer_provider is not None:  # the spans not yet sent go now
                await asyncio.to_thread(self.tracer_provider.shutdown)


def build_telemetry(settings: Settings) -> Telemetry:
    """Tracing (off unless OTEL_* asks: docs/observability.md) and the hub's metrics."""
    tracer_provider = start_tracing(os.environ)
    metrics = HubMetrics() if settings.metrics else HubMetrics.disabled()
    return Telemetry(metrics, tracer_provider)


@dataclass
class Storage:
    """The database and what the hub keeps there: tasks, conversations, usage, personas.

    On PostgreSQL this process is a replica (``cluster``): any number of them on one
    database are one hub (docs/deployment.md), and the personas are in the database too
    (``sql_personas``). Started: the schema migrated (or checked); the replica joins the
    cluster with the A2A part, which has what it needs (the registry)."""

    db: AsyncEngine
    writer: GroupCommitWriter
    """Every write of the hub, in shared transactions."""
    cluster: Cluster | None
    lean_store: SqlTaskStore
    task_store: SqlTaskStore | ClusterTaskStore
    """The tasks the registry serves: the cluster's on replicas."""
    history: ConversationHistory
    usage: UsageLog
    personas: PersonaStore
    sql_personas: SqlPersonaStore | None
    persona_data: DeletedPersonaData
    documents: KnowledgeStore
    """The personas' and conversations' knowledge documents."""
    user_personas: UserPersonas
    """Who users say they are: callers' saved user personas, conversations' (issue 37)."""
    auto_upgrade: bool

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self.db.dispose)
            await prepare_db(self.db, auto_upgrade=self.auto_upgrade)
            stack.push_async_callback(self.writer.aclose)
            stack.push_async_callback(self.lean_store.aclose)
            if self.sql_personas is not None:
                stack.push_async_callback(self.sql_personas.aclose)
            yield


def build_storage(settings: Settings, metrics: HubMetrics) -> Storage:
    """The database of the settings, and the stores on it; a single hub's personas read
    from the persona directory (any bad file stops start-up)."""
    db = create_engine(
        settings.resolved_database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
    )
    writer = GroupCommitWriter(db, on_commit=metrics.db_commit_seconds.observe)
    cluster: Cluster | None = None
    if db.dialect.name == "postgresql":
        # Imported only then: the cluster parts need asyncpg.
        from persona_agent.cluster import Cluster

        cluster = Cluster(
            writer, lease_seconds=settings.replica_lease_seconds, pool_size=settings.db_pool_size
        )
        metrics.set_replica(cluster.replica)
    usage = UsageLog(writer)
    history = ConversationHistory(
        writer,
        cache_size=settings.history_cache_size,
        cache_bytes=settings.history_cache_bytes,
        max_messages=settings.history_max_messages,
        shared=cluster is not None,
    )
    lean_store = cluster.tasks.as_task_store if cluster is not None else SqlTaskStore(writer)
    task_store: SqlTaskStore | ClusterTaskStore = (
        cluster.tasks if cluster is not None else lean_store
    )
    personas: PersonaStore
    sql_personas: SqlPersonaStore | None = None
    if cluster is not None:
        from persona_agent.personas.sql_store import SqlPersonaStore

        personas = sql_personas = SqlPersonaStore(db, limits=persona_limits(settings))
    else:
        personas = load_personas(settings)
    documents = KnowledgeStore(writer)
    user_personas = UserPersonas(writer)
    return Storage(
        db=db,
        writer=writer,
        cluster=cluster,
        lean_store=lean_store,
        task_store=task_store,
        history=history,
        usage=usage,
        personas=personas,
        sql_personas=sql_personas,
        persona_data=DeletedPersonaData(
            lean_store,
            history,
            usage,
            memories=writer,
            documents=documents,
            user_personas=user_personas,
        ),
        documents=documents,
        user_personas=user_personas,
        auto_upgrade=settings.db_auto_upgrade,
    )


def load_personas(settings: Settings) -> PersonaStore:
    """The settings' persona store, loaded; any bad file stops start-up with every problem
    named."""
    store = open_persona_store(settings)
    try:
        errors = store.load()
    except OSError as error:
        raise ConfigError(
            f"Persona directory {settings.personas_dir} cannot be read: {error}"
        ) from None
    if errors:
        raise ConfigError(
            f"{len(errors)} invalid persona file(s):\n" + "\n".join(f"  {e}" for e in errors)
        )
    return store


@dataclass
class ModelBackend:
    """The LLM backend every persona's answers come from (loaded once the personas are)."""

    llm: LLMBackend
    embedder: Callable[[], Embedder]
    """Memory's and the knowledge documents' embedder, made on first call (once)."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.llm.aclose()


def build_model_backend(settings: Settings) -> ModelBackend:
    llm = build_llm_backend(settings)
    return ModelBackend(llm, functools.cache(lambda: build_embedder(settings, llm)))


@dataclass
class Collaboration:
    """What a model may call besides the hub's own personas (the A2A part adds those, first):
    outside agents, then MCP tools (last: the toolbox takes every name left)."""

    tools: ToolSources
    remote_agents: RemoteAgents | None
    toolbox: MCPToolbox | None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if self.toolbox is not None:
                await self.toolbox.start()
                stack.push_async_callback(self.toolbox.aclose)
            if self.remote_agents is not None:
                await self.remote_agents.start()
                stack.push_async_callback(self.remote_agents.aclose)
            yield

    def tool_servers(self) -> list[str]:
        """The configured MCP servers' names."""
        return list(self.toolbox.servers) if self.toolbox is not None else []

    def agent_names(self) -> list[str]:
        """The configured outside agents' names."""
        return self.remote_agents.names() if self.remote_agents is not None else []

    def catalog_agent(self, name: str) -> bool:
        """Whether a catalog not read yet may bring in the outside agent ``name``."""
        return self.remote_agents is not None and self.remote_agents.catalogs.may_bring(name)


def build_collaboration(settings: Settings, metrics: HubMetrics) -> Collaboration:
    """The MCP servers and outside agents the settings configure. Their modules are
    imported only when configured: the MCP SDK costs ~18 MB of memory."""
    toolbox: MCPToolbox | None = None
    if settings.mcp_config is not None:
        from persona_agent.mcp.config import load_mcp_config
        from persona_agent.mcp.toolbox import MCPToolbox

        mcp_config = load_mcp_config(settings.mcp_config, os.environ)
        toolbox = MCPToolbox(mcp_config, default_timeout=settings.tool_timeout, metrics=metrics)
    remote_agents: RemoteAgents | None = None
    if settings.agents_file is not None:
        from persona_agent.a2a.catalog_reader import CatalogLimits
        from persona_agent.collab.agent_tools import RemoteAgents
        from persona_agent.collab.agents_file import load_agents_config

        agents_config = load_agents_config(settings.agents_file, os.environ)
        limits = CatalogLimits(
            max_bytes=settings.catalog_max_bytes,
            max_depth=settings.catalog_max_depth,
            max_entries=settings.catalog_max_entries,
            seconds=settings.catalog_read_seconds,
        )
        remote_agents = RemoteAgents(
            agents_config,
            metrics=metrics,
            catalog_limits=limits,
            allowed_hosts=settings.agent_url_allowed_host_list,
        )
    sources: list[ToolSource] = []
    if remote_agents is not None:
        sources.append(remote_agents)
    if toolbox is not None:
        sources.append(MCPTools(toolbox))
    return Collaboration(ToolSources(sources), remote_agents, toolbox)


def build_engine(
    settings: Settings,
    model: ModelBackend,
    storage: Storage,
    collaboration: Collaboration,
    metrics: HubMetrics,
    knowledge: Knowledge,
) -> ChatEngine:
    """The engine that answers one message as one persona (its life: the running
    summaries it makes in the background, :attr:`ChatEngine.summary`)."""
    cluster = storage.cluster
    memory = build_memory(settings, storage.writer, model.embedder, metrics)
    if settings.memory:  # the model may remember, recall and forget (docs/memory.md)
        from persona_agent.chat.memory_tools import MemoryTools
        from persona_agent.memory.shared import SharedMemory

        if isinstance(memory, SharedMemory):
            collaboration.tools.sources.insert(0, MemoryTools(memory))
    prices = load_prices(settings.llm_prices, free=(LOCAL_MODEL_NAME,))
    usage = storage.usage

    async def record(persona_id: str, model_name: str, tokens: Usage) -> None:
        await usage.record(persona_id, model_name, tokens, prices.cost(model_name, tokens))

    summary = build_summary(
        settings,
        storage.writer,
        model.llm,
        locks=cluster.locks if cluster is not None else None,
        record=record,
        metrics=metrics,
    )
    return ChatEngine(
        model.llm,
        storage.history,
        collaboration.tools,
        max_tool_iterations=settings.max_tool_iterations,
        locks=cluster.locks if cluster is not None else None,
        prices=prices,
        usage=usage,
        metrics=metrics,
        memory=memory,
        summary=summary,
        knowledge=knowledge,
        users=storage.user_personas,
        images=build_images(settings, storage.writer, model.llm),
    )


def build_images(settings: Settings, writer: GroupCommitWriter, llm: LLMBackend) -> TurnImages:
    """Who sees the images sent, and where a conversation's are kept (docs/media.md)."""
    return TurnImages(
        vision_of(settings, llm), MediaStore(writer), shown=settings.image_max_per_message
    )


def vision_of(settings: Settings, llm: LLMBackend) -> Vision:
    """Which personas see images, on the hub of ``settings`` answering with ``llm``."""
    return Vision(
        models=settings.vision_model_list,
        default_model=llm.default_model,
        embedded=not llm.supports_images,
    )


def image_limits(settings: Settings) -> ImageLimits:
    """What an image part may be (the ``PERSONA_AGENT_IMAGE_*`` settings)."""
    return ImageLimits(
        max_bytes=settings.image_max_bytes,
        max_pixels=settings.image_max_pixels,
        max_side=settings.image_max_side,
        fetch_seconds=settings.image_fetch_seconds,
        per_message=settings.image_max_per_message,
        message_bytes=settings.image_message_bytes,
        message_pixels=settings.image_message_pixels,
    )


def build_knowledge_part(settings: Settings, storage: Storage, model: ModelBackend) -> Knowledge:
    """The personas' knowledge documents, on whether memory is on or off; read by the hub's
    document reader processes (:attr:`Knowledge.reader`, closed with the A2A parts: message
    documents are read by them too)."""
    reader = build_document_reader(settings)
    return build_knowledge(settings, storage.documents, model.llm, model.embedder, reader)


@dataclass
class Protection:
    """Who may call and what they may do (credentials, quotas), what is recorded (the
    audit log), and the cards' signer."""

    authenticator: Authenticator
    api_auth: ApiAuth
    audit: AuditLog
    quotas: Quotas
    signer: CardSigner | None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            self.audit.close()


def build_protection(settings: Settings) -> Protection:
    authenticator = build_authenticator(settings)
    signer = (
        CardSigner.from_file(
            settings.card_signing_key, settings.card_signing_key_id, settings.base_url
        )
        if settings.card_signing_key is not None
        else None
    )
    audit = AuditLog(settings.audit_log)
    quotas = Quotas(
        QuotaLimits(
            requests_per_minute=settings.rate_limit,
            running_tasks=settings.max_running_tasks,
            open_streams=settings.max_streams,
            loopback_exempt=not settings.limit_loopback,
        )
    )
    api_auth = ApiAuth(
        authenticator,
        listen_host=settings.host,
        allowed_origins=settings.cors_origin_list,
        audit=audit,
    )
    return Protection(authenticator, api_auth, audit, quotas, signer)
