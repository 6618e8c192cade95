"""The database: its engine, the hub's way to it (group commit, SQLite's threads), and the
one schema every table is made on; the tables themselves are beside the stores that own
them (docs/architecture.md).

SQLite (a file in the data directory) is the embedded default; PostgreSQL
(``postgresql+asyncpg://...``) serves replicas. Statements are SQLAlchemy Core for both.
"""

from __future__ import annotations

from persona_agent.db.async_engine import create_engine
from persona_agent.db.group_commit import GroupCommitWriter
from persona_agent.db.schema import NOTIFY, SEQ, like_escaped, metadata
from persona_agent.db.task_tables import push_callers_table, tasks_table

__all__ = [
    "NOTIFY",
    "SEQ",
    "GroupCommitWriter",
    "create_engine",
    "like_escaped",
    "metadata",
    "push_callers_table",
    "tasks_table",
]
