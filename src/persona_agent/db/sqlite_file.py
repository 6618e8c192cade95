"""A SQLite file on two ``sqlite3`` connections, each in a thread of its own: the writer's
thread commits the group commit's transactions, the reader's answers queries, and the
event loop waits for neither (:class:`~persona_agent.db.group_commit.GroupCommitWriter`).

:class:`~persona_agent.db.sql.Sql` statements run as written (``sqlite3``'s named style);
a statement in SQLAlchemy Core is compiled by SQLAlchemy, imported then.
"""

from __future__ import annotations

import asyncio
import sqlite3
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from persona_agent.db.database_errors import translated
from persona_agent.db.sql import Sql

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect
    from sqlalchemy.sql import Executable
    from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["SqliteFile"]

_Work = list[tuple[str, Sequence[Sequence[Any] | Mapping[str, Any]]]]
"""A transaction's statements, each with its rows (tuples for Core's, mappings for Sql's)."""


class SqliteFile:
    """A SQLite file on two ``sqlite3`` connections, each in a thread of its own.

    One hand-over to a thread and one back per transaction or query, where the async
    engine makes several per statement; SQLite runs without the GIL, so the event loop
    goes on meanwhile. :class:`Sql` runs as written; a Core statement is compiled by
    SQLAlchemy once per shape (the same SQL, the same parameter order as through the
    engine), on the dialect ``dialect()`` gives (the engine's, made then).

    A failed statement raises :mod:`persona_agent.db.database_errors`' error for :class:`Sql`, and
    SQLAlchemy's (``IntegrityError`` ...) for Core, as through the engine.
    """

    def __init__(self, path: str, dialect: Callable[[], Dialect]) -> None:
        self._path = path
        self._dialect = dialect
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

    async def commit(self, groups: list[tuple[Sql | Executable, list[dict[str, Any]]]]) -> None:
        """Execute every group in one transaction; return once committed."""
        work: _Work = [self._prepare(statement, rows) for statement, rows in groups]
        core = any(not isinstance(statement, Sql) for statement, _ in groups)
        await asyncio.get_running_loop().run_in_executor(
            self._threads["write"], self._run, work, core
        )

    async def fetch(self, statement: Sql | Executable, parameters: dict[str, Any]) -> list[Any]:
        if isinstance(statement, Sql):
            return await asyncio.get_running_loop().run_in_executor(
                self._threads["read"], self._query, statement.text, parameters, False
            )
        compiled, sql, names = self._compile(statement, ())
        bound = compiled.construct_params(parameters)  # values in the statement, and these
        values = tuple(bound[name] for name in names)
        return await asyncio.get_running_loop().run_in_executor(
            self._threads["read"], self._query, sql, values, True
        )

    def _prepare(
        self, statement: Sql | Executable, rows: list[dict[str, Any]]
    ) -> tuple[str, Sequence[Sequence[Any] | Mapping[str, Any]]]:
        """The SQL of a write, and its rows (a Core statement's as tuples: each row names
        every parameter)."""
        if isinstance(statement, Sql):
            return statement.text, rows
        _, sql, names = self._compile(statement, tuple(rows[0]) if rows else ())
        return sql, [tuple(row[name] for name in names) for row in rows]

    def _compile(
        self, statement: Executable, keys: tuple[str, ...]
    ) -> tuple[SQLCompiler, str, tuple[str, ...]]:
        found = self._compiled.get((id(statement), keys))
        if found is None or found[0] is not statement:  # kept in it, so its id is its own
            from sqlalchemy.sql import ClauseElement
            from sqlalchemy.sql.compiler import SQLCompiler

            if not isinstance(statement, ClauseElement):
                raise TypeError(f"not a SQL statement: {statement!r}")
            compiled = statement.compile(
                dialect=self._dialect(),
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
                connection.execute("PRAGMA journal_mode=WAL")  # the file's already: no change
                connection.execute("PRAGMA synchronous=NORMAL")
            else:
                connection.execute("PRAGMA query_only=1")
            self._connections[role] = connection
        return connection

    def _query(self, sql: str, values: Sequence[Any] | Mapping[str, Any], core: bool) -> list[Any]:
        """In the reader's thread."""
        try:
            return self._connection("read").execute(sql, values).fetchall()
        except sqlite3.Error as error:
            raise _error(sql, error, core) from (None if core else error)

    def _run(self, work: _Work, core: bool) -> None:
        """In the writer's thread: one transaction. Errors come as SQLAlchemy's when a
        Core statement is in it, as through the engine (``IntegrityError`` ...)."""
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
            raise _error(sql, error, core) from (None if core else error)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        for role, thread in self._threads.items():
            connection = self._connections.pop(role, None)
            if connection is not None:
                await loop.run_in_executor(thread, connection.close)
            thread.shutdown(wait=True)


def _error(sql: str, error: sqlite3.Error, core: bool) -> Exception:
    """``error`` as SQLAlchemy's (a Core statement's) or the hub's own (:class:`Sql`'s)."""
    if core:
        from sqlalchemy.exc import DBAPIError

        return DBAPIError.instance(sql, None, error, sqlite3.Error)
    return translated(error)
