"""Storage: the database and the stores the hub keeps there (tasks, conversations, usage,
personas, documents), built from the settings; on PostgreSQL, the replica's cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from persona_agent.a2a.tasks.task_store import SqlTaskStore
from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.usage_log import UsageLog
from persona_agent.conversations.prompt_store import PromptStore
from persona_agent.conversations.user_persona import UserPersonas
from persona_agent.db import Database, GroupCommitWriter
from persona_agent.hub.persona_data import DeletedPersonaData
from persona_agent.hub.persona_store import build_persona_store
from persona_agent.knowledge.document_store import KnowledgeStore
from persona_agent.migrations import prepare_db
from persona_agent.observe.metrics import HubMetrics
from persona_agent.personas.stores.asset_store import PersonaAssets
from persona_agent.personas.stores.store import PersonaStore
from persona_agent.security.limits import Limits
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.cluster import Cluster
    from persona_agent.cluster.tasks import ClusterTaskStore
    from persona_agent.personas.stores.sql_store import SqlPersonaStore

__all__ = ["Storage", "build_storage"]


@dataclass
class Storage:
    """The database and what the hub keeps there: tasks, conversations, usage, personas.

    On PostgreSQL this process is a replica (``cluster``): any number of them on one
    database are one hub (docs/deployment.md), and the personas are in the database too
    (``sql_personas``). Started: the schema migrated (or checked); the replica joins the
    cluster with the A2A part, which has what it needs (the registry)."""

    db: Database
    """The database: SQLAlchemy's engine on it is made only when needed (PostgreSQL, a
    migration), so a default hub on its SQLite file runs without SQLAlchemy."""
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
    prompts: PromptStore
    """What reached the model for each answer (docs/prompt.md)."""
    persona_assets: PersonaAssets
    """The assets of the CHARX each persona came in (docs/personas.md)."""
    persona_limits: Limits
    """How large a persona file or body may be: one object for the store, the REST API and
    the body limit (built once from the settings)."""
    auto_upgrade: bool

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(self.db.dispose)
            await prepare_db(self.writer, auto_upgrade=self.auto_upgrade)
            stack.push_async_callback(self.writer.aclose)
            stack.push_async_callback(self.lean_store.aclose)
            if self.sql_personas is not None:
                stack.push_async_callback(self.sql_personas.aclose)
            yield


def build_storage(settings: Settings, metrics: HubMetrics) -> Storage:
    """The database of the settings, and the stores on it; a single hub's personas read
    from the persona directory (any bad file stops start-up)."""
    db = Database(
        settings.resolved_database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
    )
    writer = GroupCommitWriter(db, on_commit=metrics.db_commit_seconds.observe)
    cluster: Cluster | None = None
    if db.dialect == "postgresql":
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
    personas = build_persona_store(settings, db, replica=cluster is not None)
    documents = KnowledgeStore(writer)
    user_personas = UserPersonas(writer)
    prompts = PromptStore(writer, keep=settings.prompt_records_kept)
    persona_assets = PersonaAssets(writer)
    return Storage(
        db=db,
        writer=writer,
        cluster=cluster,
        lean_store=lean_store,
        task_store=task_store,
        history=history,
        usage=usage,
        personas=personas.store,
        sql_personas=personas.sql,
        persona_data=DeletedPersonaData(
            lean_store,
            history,
            usage,
            memories=writer,
            documents=documents,
            user_personas=user_personas,
            assets=persona_assets,
        ),
        documents=documents,
        user_personas=user_personas,
        prompts=prompts,
        persona_assets=persona_assets,
        persona_limits=personas.limits,
        auto_upgrade=settings.db_auto_upgrade,
    )
