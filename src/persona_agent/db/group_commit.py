"""The hub's way to its database: writes grouped into shared transactions (group commit),
and reads off the event loop.

Statements are :class:`~persona_agent.db.sql.Sql` text (or SQLAlchemy Core, which the
replicas' own tables still use); a SQLite file is reached through
:class:`~persona_agent.db.sqlite_file.SqliteFile`, another database (PostgreSQL) through
the SQLAlchemy async engine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind

from persona_agent.db.database import Database
from persona_agent.db.database_errors import translated
from persona_agent.db.sql import Sql
from persona_agent.db.sqlite_file import SqliteFile
from persona_agent.observe.tracing import TRACER

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine
    from sqlalchemy.sql import Executable
    from sqlalchemy.sql.elements import TextClause

__all__ = ["GroupCommitWriter"]


class GroupCommitWriter:
    """The hub's way to its database: group-commit writes, and reads off the event loop.

    Writes that arrive while a transaction is being written all go into the next
    one, and each writer is answered once its rows are committed: under load, one
    transaction holds the saves of many tasks and conversations. Built once, in
    ``create_app``, and passed to the task store, the history and the retention
    sweep. Statements are :class:`Sql` text (a failure raises
    :mod:`persona_agent.db.database_errors`' errors on every database), or SQLAlchemy Core
    (SQLAlchemy's errors).

    A SQLite file is reached through the standard ``sqlite3`` module only: one
    connection writes in a thread of its own, another reads in a second thread, so
    the event loop never waits for SQLite (through the async engine, aiosqlite,
    the hub answered half as many messages: docs/performance.md). Other databases
    (PostgreSQL) are reached through the SQLAlchemy async engine; a SQLite file needs the
    engine only for a Core statement (:class:`~persona_agent.db.database.Database`).

    Each write is a span (``INSERT pa_tasks``...: the database's semantic conventions) in
    its caller's trace; ``on_commit(seconds)`` hears how long each transaction took.
    """

    def __init__(
        self,
        database: Database | AsyncEngine,
        *,
        on_commit: Callable[[float], None] | None = None,
    ) -> None:
        self.database = database if isinstance(database, Database) else Database.of(database)
        self.dialect = self.database.dialect
        """``sqlite`` or ``postgresql``: what the statements run on."""
        self.on_commit = on_commit
        self._queue: list[
            tuple[Sql | Executable, Sequence[dict[str, Any]], asyncio.Future[None]]
        ] = []
        self._writer: asyncio.Task[None] | None = None
        path = self.database.sqlite_path
        self._file = (
            SqliteFile(path, lambda: self.database.engine.dialect) if path is not None else None
        )
        self._reader: AsyncEngine | None = None
        self._texts: dict[str, TextClause] = {}
        self.transactions = 0
        """Transactions committed by :meth:`write` (each holds every write that waited for it)."""

    @property
    def engine(self) -> AsyncEngine:
        """SQLAlchemy's async engine on the database (made on first use for a SQLite file)."""
        return self.database.engine

    async def write(self, statement: Sql | Executable, rows: Sequence[dict[str, Any]]) -> None:
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
                        "db.system.name": self.dialect,
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
        self, writes: Sequence[tuple[Sql | Executable, Sequence[dict[str, Any]]]]
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
        self, statement: Sql | Executable, parameters: dict[str, Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """The rows of a query (with values for its parameters), off the event loop."""
        if self._file is not None:
            return await self._file.fetch(statement, parameters or {})
        if self._reader is None:
            self._reader = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        try:
            async with self._reader.connect() as conn:  # one round trip: no BEGIN, no ROLLBACK
                result = await conn.execute(self._executable(statement), parameters or {})
                return [tuple(row) for row in result.all()]
        except Exception as error:
            raise _error_of(statement, error) from error

    def _executable(self, statement: Sql | Executable) -> Executable:
        """What the engine runs: a :class:`Sql`'s text as SQLAlchemy's ``text()``, made once."""
        if not isinstance(statement, Sql):
            return statement
        sql = statement.for_dialect(self.dialect)
        found = self._texts.get(sql)
        if found is None:
            from sqlalchemy import text

            if len(self._texts) >= 512:  # texts built for one call (IN lists, filters)
                self._texts.clear()
            found = self._texts[sql] = text(sql)
        return found

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
                            try:
                                await conn.execute(self._executable(statement), rows)
                            except Exception as error:
                                raise _error_of(statement, error) from error
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


def _error_of(statement: Sql | Executable, error: Exception) -> Exception:
    """A failed statement's error as its caller expects it: the hub's own for :class:`Sql`
    (a database's error; anything else as it is), SQLAlchemy's for Core."""
    if not isinstance(statement, Sql) or "DBAPIError" not in {
        kind.__name__ for kind in type(error).__mro__
    }:
        return error
    return translated(error)


def _table(statement: Sql | Executable) -> str:
    """The table a statement writes, by name (Core's ``Table`` or :class:`Sql`'s text)."""
    table = getattr(statement, "table", None)
    return table if isinstance(table, str) else str(getattr(table, "name", ""))


def _operation(statement: Sql | Executable) -> tuple[str, str]:
    """A write's operation (``INSERT``, ``UPDATE``, ``DELETE``) and table, for its span."""
    table = _table(statement)
    if isinstance(statement, Sql):
        return statement.operation, table
    for operation in ("insert", "update", "delete"):
        if getattr(statement, f"is_{operation}", False):
            return operation.upper(), str(table)
    return "EXECUTE", str(table)


def _grouped(
    batch: list[tuple[Sql | Executable, Sequence[dict[str, Any]], asyncio.Future[None]]],
) -> list[tuple[Sql | Executable, list[dict[str, Any]]]]:
    """One executemany per statement, in an order that keeps every table's writes in order.

    Rows of one statement join its group unless another statement has written
    the same table since (a delete between two saves of a task): then a new
    group starts.
    """
    groups: list[tuple[Sql | Executable, list[dict[str, Any]]]] = []
    group_of: dict[int, int] = {}
    last_on_table: dict[str, int] = {}
    for statement, rows, _ in batch:
        table = _table(statement)
        index = group_of.get(id(statement))
        if index is None or last_on_table.get(table, index) != index:
            groups.append((statement, []))
            index = group_of[id(statement)] = len(groups) - 1
        last_on_table[table] = index
        groups[index][1].extend(rows)
    return groups
