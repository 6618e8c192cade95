"""The database: its URL and engine, the hub's way to it (group commit, SQLite's threads,
:class:`Sql` statements), and the one schema every table is made on; the tables themselves
are beside the stores that own them (docs/architecture.md).

SQLite (a file in the data directory) is the embedded default; PostgreSQL
(``postgresql+asyncpg://...``) serves replicas. The stores' statements are :class:`Sql`
text, which a SQLite file runs on ``sqlite3`` alone; SQLAlchemy (the engine, the tables'
definitions, Core) is imported only by what uses it: the names below that need it load on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from persona_agent.db.database import Database
from persona_agent.db.database_errors import DatabaseError, IntegrityError, OperationalError
from persona_agent.db.group_commit import GroupCommitWriter
from persona_agent.db.sql import Sql, in_list, like_escaped

if TYPE_CHECKING:
    from persona_agent.db.async_engine import create_engine
    from persona_agent.db.schema import NOTIFY, SEQ, metadata
    from persona_agent.db.task_tables import push_callers_table, tasks_table

__all__ = [
    "NOTIFY",
    "SEQ",
    "Database",
    "DatabaseError",
    "GroupCommitWriter",
    "IntegrityError",
    "OperationalError",
    "Sql",
    "create_engine",
    "in_list",
    "like_escaped",
    "metadata",
    "push_callers_table",
    "tasks_table",
]

_WITH_SQLALCHEMY = {
    "create_engine": "persona_agent.db.async_engine",
    "NOTIFY": "persona_agent.db.schema",
    "SEQ": "persona_agent.db.schema",
    "metadata": "persona_agent.db.schema",
    "push_callers_table": "persona_agent.db.task_tables",
    "tasks_table": "persona_agent.db.task_tables",
}


def __getattr__(name: str) -> Any:
    """The names that need SQLAlchemy, imported with it on first use."""
    module = _WITH_SQLALCHEMY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)
