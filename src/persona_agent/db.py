"""The database: its tables, its SQLAlchemy async engine, and the hub's way to it.

SQLite (a file in the data directory) is the embedded default; PostgreSQL
(``postgresql+asyncpg://...``) serves replicas. Statements are SQLAlchemy Core for
both; :class:`GroupCommitWriter` says how each is reached.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opentelemetry.trace import SpanKind
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    event,
    func,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from persona_agent.db_conversations import conversation_tables
from persona_agent.db_documents import document_tables
from persona_agent.db_media import media
from persona_agent.db_memory import memory_tables
from persona_agent.db_user_personas import user_personas
from persona_agent.errors import ConfigError
from persona_agent.observe.tracing import TRACER

__all__ = [
    "GroupCommitWriter",
    "create_engine",
    "document_chunks_table",
    "documents_table",
    "like_escaped",
    "media_table",
    "memories_table",
    "messages_table",
    "metadata",
    "personas_table",
    "push_callers_table",
    "replicas_table",
    "summaries_table",
    "swipes_table",
    "task_events_table",
    "tasks_table",
    "usage_table",
    "user_personas_table",
]

NOTIFY = text("SELECT pg_notify(:channel, :payload)")
"""PostgreSQL: notify ``channel`` with ``payload`` (at most 8000 bytes) when the transaction
commits (replicas listen: :mod:`persona_agent.cluster.notify`)."""

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
    # Replicas (PostgreSQL): how many times the task was written (the SDK's TaskVersion, for
    # compare-and-swap), and the replica that wrote it last (whose lease covers it).
    Column("version", BigInteger, nullable=False, server_default="0"),
    Column("replica", String(100), nullable=True),
    Index("ix_pa_tasks_owner_order", "owner", "sort_ts", "id"),
    Index("ix_pa_tasks_replica_state", "replica", "state"),
    Index("ix_pa_tasks_owner_context", "owner", "context_id"),
)

messages_table, swipes_table = conversation_tables(metadata)
"""Each conversation's selected branch, in order (a message's id is its ``seq``), and the
alternatives of answers that have more than one: :mod:`persona_agent.db_conversations`."""

_Seq = BigInteger().with_variant(Integer, "sqlite")  # SQLite autoincrements INTEGER only

usage_table = Table(
    "pa_usage",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True),
    Column("persona_id", String(63), nullable=False),
    Column("model", String(200), nullable=False),
    Column("at_ms", BigInteger, nullable=False),  # when the turn completed, ms since the epoch
    Column("prompt_tokens", BigInteger, nullable=False),
    Column("completion_tokens", BigInteger, nullable=False),
    Column("cached_prompt_tokens", BigInteger, nullable=False),
    Column("cost_usd", Float, nullable=True),  # none: the model has no price
    Index("ix_pa_usage_persona_at", "persona_id", "at_ms"),
)
"""Each completed answer's tokens and cost (:class:`persona_agent.chat.usage_log.UsageLog`)."""

task_events_table = Table(
    "pa_task_events",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True),
    Column("task_id", String(200), nullable=False),
    Column("version", BigInteger, nullable=False),  # the task's version after this event
    Column("data", LargeBinary, nullable=False),  # a StreamResponse, serialized protobuf
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_pa_task_events_task", "task_id", "version"),
)
"""Replicas (PostgreSQL): each event of a task, in order, for subscribers on other replicas
(:mod:`persona_agent.cluster.task_events`)."""

replicas_table = Table(
    "pa_replicas",
    metadata,
    Column("id", String(100), primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""Replicas (PostgreSQL): one row per live replica, its lease renewed by heartbeats
(:mod:`persona_agent.cluster.leases`)."""

personas_table = Table(
    "pa_personas",
    metadata,
    Column("id", String(63), primary_key=True),
    Column("version", String(64), nullable=False),  # the persona's content version (its ETag)
    Column("document", Text, nullable=False),  # the persona as YAML
    Column("image", LargeBinary, nullable=True),  # its avatar, PNG without text chunks
    Column("source_hash", String(64), nullable=True),  # the file it was imported from
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""Replicas (PostgreSQL): the personas
(:class:`persona_agent.personas.sql_store.SqlPersonaStore`)."""


memories_table, summaries_table = memory_tables(metadata, _Seq)
"""What callers told personas, with its vectors (:mod:`persona_agent.memory.remembered`),
and each conversation's running summary of the messages that left its window
(:mod:`persona_agent.memory.summary`): :mod:`persona_agent.db_memory`."""

documents_table, document_chunks_table = document_tables(metadata, _Seq)
"""Knowledge documents and their passages (:mod:`persona_agent.db_documents`)."""
user_personas_table = user_personas(metadata)  # who users say they are (issue 37)
media_table = media(metadata)  # images sent to conversations (issue 38)


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
per caller (:class:`persona_agent.a2a.push.configs.IndexedConfigStore`)."""


def create_engine(url: str, *, pool_size: int = 10, max_overflow: int = 20) -> AsyncEngine:
    """An engine for ``url``; for SQLite, the parent directory is created and WAL is on.
    ``pool_size`` and ``max_overflow``: the connection pool of another database.

    Raises:
        ConfigError: ``url`` is not a database URL, or names a driver that is not
            installed or not an asyncio one.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            "The database URL is not a database URL: give one such as "
            "sqlite+aiosqlite:///path/to/hub.db or postgresql+asyncpg://user@host/db"
        ) from None
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    # SQLite has one writer at a time; several pooled connections contend for its lock
    # (and a read that upgrades to a write fails at once with "database is locked").
    # One connection serializes every statement in order instead.
    where = f"{parsed.drivername}://"  # never the rest: it may hold a password
    try:
        engine = (
            create_async_engine(url, pool_size=1, max_overflow=0)
            if is_sqlite
            else create_async_engine(url, pool_size=pool_size, max_overflow=max_overflow)
        )
    except ModuleNotFoundError as error:
        extra = (
            # Not `pip install persona-agent`: that name on PyPI is another project's.
            ": for PostgreSQL, use postgresql+asyncpg:// and install the driver with "
            "`uv sync --extra postgres`"
            if parsed.get_backend_name() == "postgresql"
            else ""
        )
        raise ConfigError(
            f"The database URL ({where}) needs the Python package '{error.name}'{extra}"
        ) from None
    except (NoSuchModuleError, InvalidRequestError):
        raise ConfigError(
            f"The database URL ({where}) must name an asyncio driver: "
            "sqlite+aiosqlite:// or postgresql+asyncpg://"
        ) from None
    if is_sqlite:

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.close()

    return engine


class GroupCommitWriter:
    """The hub's way to its database: group-commit writes, and reads off the event loop.

    Writes that arrive while a transaction is being written all go into the next
    one, and each writer is answered once its rows are committed: under load, one
    transaction holds the saves of many tasks and conversations. Built once, in
    ``create_app``, and passed to the task store, the history and the retention
    sweep. Statements are SQLAlchemy Core for every database.

    A SQLite file is reached through the standard ``sqlite3`` module only: one
    connection writes in a thread of its own, another reads in a second thread, so
    the event loop never waits for SQLite (through the async engine, aiosqlite,
    the hub answered half as many messages: docs/performance.md). Other databases
    (PostgreSQL) are reached through the SQLAlchemy async engine.

    Each write is a span (``INSERT pa_tasks``...: the database's semantic conventions) in
    its caller's trace; ``on_commit(seconds)`` hears how long each transaction took.
    """

    def __init__(
        self, engine: AsyncEngine, *, on_commit: Callable[[float], None] | None = None
    ) -> None:
        self.engine = engine
        self.on_commit = on_commit
        self._queue: list[tuple[Executable, Sequence[dict[str, Any]], asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        url = engine.url
        local = url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
        self._file = _SqliteFile(str(url.database), engine) if local else None
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.transactions = 0
        """Transactions committed by :meth:`write` (each holds every write that waited for it)."""

    async def write(self, statement: Executable, rows: Sequence[dict[str, Any]]) -> None:
        """Execute ``statement`` for ``rows`` in the next transaction; return once committed.

        A caller canceled while it waits does not take its rows back: they are written.

        Raises:
            Exception: whatever the transaction raised (every writer of it gets it).
        """
        with TRACER.start_as_current_span("db write", kind=SpanKind.CLIENT) as span:
            if span.is_recording():
                operation, table = _operation(statement)
                span.update_name(f"{operation} {table}")
                span.set_attributes(
                    {
                        "db.system.name": self.engine.dialect.name,
                        "db.operation.name": operation,
                        "db.collection.name": table,
                        "db.operation.batch.size": len(rows),
                    }
                )
            done = asyncio.get_running_loop().create_future()
            self._queue.append((statement, rows, done))
            if self._writer is None or self._writer.done():
                self._writer = asyncio.create_task(self._write_all())
            await asyncio.shield(done)

    async def write_together(
        self, writes: Sequence[tuple[Executable, Sequence[dict[str, Any]]]]
    ) -> None:
        """Execute each (statement, rows) in order, all in one transaction: all are
        committed, or none (a document and its passages)."""
        futures: list[asyncio.Future[None]] = []
        loop = asyncio.get_running_loop()
        for statement, rows in writes:  # queued with no await between: one batch
            futures.append(loop.create_future())
            self._queue.append((statement, rows, futures[-1]))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_all())
        await asyncio.shield(asyncio.gather(*futures))

    async def fetch(
        self, statement: Executable, parameters: dict[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """The rows of a query (with values for its ``bindparam``s), off the event loop."""
        if self._file is not None:
            return await self._file.fetch(statement, parameters or {})
        async with self._reader.connect() as conn:  # one round trip: no BEGIN, no ROLLBACK
            result = await conn.execute(statement, parameters or {})
            return [tuple(row) for row in result.all()]

    async def _write_all(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            started = time.perf_counter()
            try:
                if self._file is not None:
                    await self._file.commit(_grouped(batch))
                else:
                    async with self.engine.begin() as conn:
                        for statement, rows in _grouped(batch):
                            await conn.execute(statement, rows)
                self.transactions += 1
                if self.on_commit is not None:
                    self.on_commit(time.perf_counter() - started)
            except Exception as error:
                for _, _, done in batch:
                    if not done.done():
                        done.set_exception(error)
                continue
            for _, _, done in batch:
                if not done.done():
                    done.set_result(None)

    async def aclose(self) -> None:
        """Wait for the writes under way; close the SQLite connections."""
        if self._writer is not None:
            await self._writer
        if self._file is not None:
            await self._file.aclose()


class _SqliteFile:
    """A SQLite file on two ``sqlite3`` connections, each in a thread of its own.

    One hand-over to a thread and one back per transaction or query, where the async
    engine makes several per statement; SQLite runs without the GIL, so the event loop
    goes on meanwhile. Statements are compiled by SQLAlchemy once per shape (the same
    SQL, the same parameter order as through the engine).
    """

    def __init__(self, path: str, engine: AsyncEngine) -> None:
        self._path = path
        self._dialect = engine.dialect
        self._compiled: dict[
            tuple[int, tuple[str, ...]], tuple[Executable, SQLCompiler, str, tuple[str, ...]]
        ] = {}
        self._threads = {
            "write": ThreadPoolExecutor(1, thread_name_prefix="persona-agent-db-write"),
            "read": ThreadPoolExecutor(1, thread_name_prefix="persona-agent-db-read"),
        }
        self._connections: dict[str, sqlite3.Connection] = {}
        # Never closed (a test's engine): the threads end with the object.
        for thread in self._threads.values():
            weakref.finalize(self, thread.shutdown, wait=False)

    async def commit(self, groups: list[tuple[Executable, list[dict[str, Any]]]]) -> None:
        """Execute every group in one transaction; return once committed."""
        work = [self._prepare(statement, rows) for statement, rows in groups]
        await asyncio.get_running_loop().run_in_executor(self._threads["write"], self._run, work)

    async def fetch(self, statement: Executable, parameters: dict[str, Any]) -> list[Any]:
        compiled, sql, names = self._compile(statement, ())
        bound = compiled.construct_params(parameters)  # values in the statement, and these
        values = tuple(bound[name] for name in names)
        return await asyncio.get_running_loop().run_in_executor(
            self._threads["read"], self._query, sql, values
        )

    def _prepare(
        self, statement: Executable, rows: list[dict[str, Any]]
    ) -> tuple[str, list[tuple[Any, ...]]]:
        """The SQL of a write, and its rows as tuples (each row names every parameter)."""
        _, sql, names = self._compile(statement, tuple(rows[0]) if rows else ())
        return sql, [tuple(row[name] for name in names) for row in rows]

    def _compile(
        self, statement: Executable, keys: tuple[str, ...]
    ) -> tuple[SQLCompiler, str, tuple[str, ...]]:
        found = self._compiled.get((id(statement), keys))
        if found is None or found[0] is not statement:  # kept in it, so its id is its own
            if not isinstance(statement, ClauseElement):
                raise TypeError(f"not a SQL statement: {statement!r}")
            compiled = statement.compile(
                dialect=self._dialect,
                column_keys=list(keys),
                # ``in_()`` lists as the statement holds them (none is given per call).
                compile_kwargs={"render_postcompile": True},
            )
            if not isinstance(compiled, SQLCompiler):
                raise TypeError(f"not a SQL statement: {statement!r}")
            if len(self._compiled) >= 256:  # statements built for one query (list filters)
                self._compiled.clear()
            found = (statement, compiled, str(compiled), tuple(compiled.positiontup or ()))
            self._compiled[(id(statement), keys)] = found
        return found[1], found[2], found[3]

    def _connection(self, role: str) -> sqlite3.Connection:
        connection = self._connections.get(role)
        if connection is None:
            connection = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            connection.execute("PRAGMA busy_timeout=5000")
            if role == "write":
                connection.execute("PRAGMA synchronous=NORMAL")
            else:
                connection.execute("PRAGMA query_only=1")
            self._connections[role] = connection
        return connection

    def _query(self, sql: str, values: tuple[Any, ...]) -> list[Any]:
        """In the reader's thread."""
        try:
            return self._connection("read").execute(sql, values).fetchall()
        except sqlite3.Error as error:
            raise DBAPIError.instance(sql, None, error, sqlite3.Error) from None

    def _run(self, work: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """In the writer's thread: one transaction. Errors come as SQLAlchemy's, as through
        the engine (``IntegrityError`` ...)."""
        sql = "BEGIN IMMEDIATE"
        try:
            connection = self._connection("write")
            connection.execute(sql)
            try:
                for sql, parameters in work:
                    connection.executemany(sql, parameters)
                sql = "COMMIT"
                connection.execute(sql)
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise DBAPIError.instance(sql, None, error, sqlite3.Error) from None

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        for role, thread in self._threads.items():
            connection = self._connections.pop(role, None)
            if connection is not None:
                await loop.run_in_executor(thread, connection.close)
            thread.shutdown(wait=True)


def _operation(statement: Executable) -> tuple[str, str]:
    """A write's operation (``INSERT``, ``UPDATE``, ``DELETE``) and table, for its span."""
    table = getattr(getattr(statement, "table", None), "name", "")
    for operation in ("insert", "update", "delete"):
        if getattr(statement, f"is_{operation}", False):
            return operation.upper(), str(table)
    return "EXECUTE", str(table)


def _grouped(
    batch: list[tuple[Executable, Sequence[dict[str, Any]], asyncio.Future[None]]],
) -> list[tuple[Executable, list[dict[str, Any]]]]:
    """One executemany per statement, in an order that keeps every table's writes in order.

    Rows of one statement join its group unless another statement has written
    the same table since (a delete between two saves of a task): then a new
    group starts.
    """
    groups: list[tuple[Executable, list[dict[str, Any]]]] = []
    group_of: dict[int, int] = {}
    last_on_table: dict[object, int] = {}
    for statement, rows, _ in batch:
        table = getattr(statement, "table", None)
        index = group_of.get(id(statement))
        if index is None or last_on_table.get(table, index) != index:
            groups.append((statement, []))
            index = group_of[id(statement)] = len(groups) - 1
        last_on_table[table] = index
        groups[index][1].extend(rows)
    return groups


def like_escaped(text: str) -> str:
    """``text`` for a LIKE pattern with ``\\`` as the escape (``escape="\\"``): its
    wildcards taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
