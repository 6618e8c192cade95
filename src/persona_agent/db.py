"""The database: one SQLAlchemy async engine for tasks and conversation history.

SQLite (a file in the data directory) is the embedded default; any SQLAlchemy
async URL works (``postgresql+asyncpg://...`` for replicas).

:func:`database` gives what the task store and the history share per engine:
group commit (every write of every task and conversation that arrives while a
transaction is being written goes into the next one, and each writer is
answered once its rows are committed) and, on a SQLite file, key lookups on a
read-only connection of the standard ``sqlite3`` module, run in place (a few
microseconds, where a query through the async engine costs half a millisecond
of CPU: docs/performance.md).
"""

from __future__ import annotations

import asyncio
import sqlite3
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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
from sqlalchemy.exc import ArgumentError, DBAPIError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from persona_agent.errors import ConfigError

__all__ = [
    "Database",
    "create_engine",
    "database",
    "init_db",
    "messages_table",
    "metadata",
    "tasks_table",
]

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
    """An engine for ``url``; for SQLite, the parent directory is created and WAL is on.

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
            else create_async_engine(url)
        )
    except ModuleNotFoundError as error:
        extra = (
            ": for PostgreSQL, use postgresql+asyncpg:// and pip install 'persona-agent[postgres]'"
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


async def init_db(engine: AsyncEngine) -> None:
    """Create the tables that do not exist yet."""
    async with engine.begin() as conn:
        await conn.run_sync(metadata.create_all)


class Database:
    """Group commit and fast local reads over one engine. Get it with :func:`database`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._queue: list[tuple[Executable, Sequence[dict[str, Any]], asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        url = engine.url
        self._local_path = (
            url.database
            if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
            else None
        )
        self._reader: sqlite3.Connection | None = None
        self._local_writer: _LocalWriter | None = None
        self.transactions = 0
        """Transactions committed by :meth:`write` (each holds every write that waited for it)."""

    async def write(self, statement: Executable, rows: Sequence[dict[str, Any]]) -> None:
        """Execute ``statement`` for ``rows`` in the next transaction; return once committed.

        A caller canceled while it waits does not take its rows back: they are written.

        Raises:
            Exception: whatever the transaction raised (every writer of it gets it).
        """
        done = asyncio.get_running_loop().create_future()
        self._queue.append((statement, rows, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_all())
        await asyncio.shield(done)

    async def _write_all(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                if self._local_path is not None:
                    if self._local_writer is None:
                        self._local_writer = _LocalWriter(self._local_path, self.engine)
                    await self._local_writer.commit(_grouped(batch))
                else:
                    async with self.engine.begin() as conn:
                        for statement, rows in _grouped(batch):
                            await conn.execute(statement, rows)
                self.transactions += 1
            except Exception as error:
                for _, _, done in batch:
                    if not done.done():
                        done.set_exception(error)
                continue
            for _, _, done in batch:
                if not done.done():
                    done.set_result(None)

    def query_local(self, sql: str, parameters: Sequence[Any]) -> list[Any] | None:
        """Rows of a read-only query run in place on a SQLite file; None on other databases.

        For lookups by key: the call blocks the event loop while SQLite answers.
        """
        if self._local_path is None:
            return None
        if self._reader is None:
            reader = sqlite3.connect(
                self._local_path, isolation_level=None, check_same_thread=False
            )
            reader.execute("PRAGMA query_only=1")
            reader.execute("PRAGMA busy_timeout=1000")
            self._reader = reader
        return self._reader.execute(sql, parameters).fetchall()

    async def aclose(self) -> None:
        """Wait for the writes under way; close the local connections."""
        if self._writer is not None:
            await self._writer
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._local_writer is not None:
            await self._local_writer.aclose()
            self._local_writer = None


class _LocalWriter:
    """The writes to a SQLite file, on a ``sqlite3`` connection in a thread of its own.

    One hand-over to the thread and one back per transaction, where the async
    engine (aiosqlite) makes several per statement; SQLite runs without the GIL,
    so the event loop goes on meanwhile. Statements are compiled by SQLAlchemy
    once (same SQL, same parameter order as through the engine).
    """

    def __init__(self, path: str, engine: AsyncEngine) -> None:
        self._path = path
        self._dialect = engine.dialect
        self._compiled: dict[tuple[int, tuple[str, ...]], tuple[Executable, str, tuple[str, ...]]]
        self._compiled = {}
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="persona-agent-db")
        self._connection: sqlite3.Connection | None = None
        # Never closed (a test's engine): the thread ends with the writer.
        weakref.finalize(self, self._thread.shutdown, wait=False)

    async def commit(self, groups: list[tuple[Executable, list[dict[str, Any]]]]) -> None:
        """Execute every group in one transaction; return once committed."""
        work = [self._prepare(statement, rows) for statement, rows in groups]
        await asyncio.get_running_loop().run_in_executor(self._thread, self._run, work)

    def _prepare(
        self, statement: Executable, rows: list[dict[str, Any]]
    ) -> tuple[str, list[tuple[Any, ...]]]:
        keys = tuple(rows[0]) if rows else ()
        found = self._compiled.get((id(statement), keys))
        if found is None or found[0] is not statement:  # kept in it, so its id is its own
            if not isinstance(statement, ClauseElement):
                raise TypeError(f"not a SQL statement: {statement!r}")
            compiled = statement.compile(dialect=self._dialect, column_keys=list(keys))
            if not isinstance(compiled, SQLCompiler):
                raise TypeError(f"not a SQL statement: {statement!r}")
            found = (statement, str(compiled), tuple(compiled.positiontup or ()))
            self._compiled[(id(statement), keys)] = found
        _, sql, names = found
        return sql, [tuple(row[name] for name in names) for row in rows]

    def _run(self, work: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
        """In the writer's thread: one transaction. Errors come as SQLAlchemy's, as through
        the engine (``IntegrityError`` ...)."""
        sql = "BEGIN IMMEDIATE"
        try:
            connection = self._connection
            if connection is None:
                connection = sqlite3.connect(
                    self._path, isolation_level=None, check_same_thread=False
                )
                connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute("PRAGMA busy_timeout=5000")
                self._connection = connection
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
        if self._connection is not None:
            connection = self._connection
            await asyncio.get_running_loop().run_in_executor(self._thread, connection.close)
        self._thread.shutdown(wait=True)


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


_databases: weakref.WeakKeyDictionary[AsyncEngine, Database] = weakref.WeakKeyDictionary()


def database(engine: AsyncEngine) -> Database:
    """The one :class:`Database` of an engine, shared by everything that writes through it."""
    found = _databases.get(engine)
    if found is None:
        found = _databases[engine] = Database(engine)
    return found
