"""The database: one SQLAlchemy async engine for tasks and conversation history.

SQLite (a file in the data directory) is the embedded default; any SQLAlchemy
async URL works (``postgresql+asyncpg://...`` for replicas).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    event,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

__all__ = ["create_engine", "init_db", "messages_table", "metadata", "tasks_table"]

metadata = MetaData()

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
    Index("ix_pa_tasks_owner_order", "owner", "sort_ts", "id"),
    Index("ix_pa_tasks_owner_context", "owner", "context_id"),
)

messages_table = Table(
    "pa_messages",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("conversation", String(300), nullable=False),  # "{persona_id}:{context_id}"
    Column("message", Text, nullable=False),  # one chat message, JSON in the OpenAI format
    Index("ix_pa_messages_conversation", "conversation", "seq"),
)


def create_engine(url: str) -> AsyncEngine:
    """An engine for ``url``; for SQLite, the parent directory is created and WAL is on."""
    parsed = make_url(url)
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    # SQLite has one writer at a time; several pooled connections contend for its lock
    # (and a read that upgrades to a write fails at once with "database is locked").
    # One connection serializes every statement in order instead.
    engine = (
        create_async_engine(url, pool_size=1, max_overflow=0)
        if is_sqlite
        else create_async_engine(url)
    )
    if is_sqlite:

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.close()

    return engine


async def init_db(engine: AsyncEngine) -> None:
    """Create the tables that do not exist yet."""
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)
