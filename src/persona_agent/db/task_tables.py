"""The A2A tasks' tables: each task of every persona (:mod:`persona_agent.a2a.tasks.task_store`)
and who created each push-notification config (:mod:`persona_agent.a2a.tasks.push.configs`).

Their owners are in :mod:`persona_agent.a2a`, being rearranged in this wave (issue 47):
these two join them there once it has its tasks package.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, LargeBinary, String, Table

from persona_agent.db.schema import metadata

__all__ = ["push_callers_table", "tasks_table"]

tasks_table = Table(
    "pa_tasks",
    metadata,
    Column("owner", String(200), primary_key=True),
    Column("id", String(200), primary_key=True),
    Column("context_id", String(200), nullable=False),
    Column("state", Integer, nullable=False),
    # Status timestamp in ns, -1 without one: ListTasks orders by (sort_ts, id) descending.
    Column("sort_ts", BigInteger, nullable=False),
    Column("data", LargeBinary, nullable=False),  # the task, serialized protobuf
    # Replicas (PostgreSQL): how many times the task was written (the SDK's TaskVersion, for
    # compare-and-swap), and the replica that wrote it last (whose lease covers it).
    Column("version", BigInteger, nullable=False, server_default="0"),
    Column("replica", String(100), nullable=True),
    Index("ix_pa_tasks_owner_order", "owner", "sort_ts", "id"),
    Index("ix_pa_tasks_replica_state", "replica", "state"),
    Index("ix_pa_tasks_owner_context", "owner", "context_id"),
)

push_callers_table = Table(
    "pa_push_callers",
    metadata,
    Column("task_id", String(200), primary_key=True),
    Column("config_id", String(255), primary_key=True),
    Column("owner", String(200), nullable=False),  # the task's owner, as in pa_tasks
    Column("caller", String(300), nullable=False),  # a principal, or ip:{address}
    Column("created_ms", BigInteger, nullable=False),  # ms since the epoch
    Index("ix_pa_push_callers_caller", "caller"),
)
"""Who created each push-notification config (the SDK's table does not say), for the cap
per caller (:class:`persona_agent.a2a.tasks.push.configs.IndexedConfigStore`)."""
