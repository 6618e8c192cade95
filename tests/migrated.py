"""A freshly migrated hub database for each test, from one real migration a worker.

Migrating a database (Alembic, fourteen revisions) costs about a quarter of a second of CPU,
and on PostgreSQL a second or more of waiting; the ``engine`` fixture (tests/conftest.py)
hands one to a couple of hundred tests, and every hub a fixture starts on a new data
directory (in process, or as tests/servers/hub_process.py's process) migrated its own. Each
worker migrates once, then gives each test a database that is exactly that fresh one again:

- SQLite: the migrated file, checkpointed so that it is whole, copied into the test's
  directory or the hub's data directory (:class:`SqliteTemplate`);
- PostgreSQL: the worker's database (``test_gw0`` ...), its rows deleted and its
  sequences restarted, when its schema is still the one the migration made
  (:class:`PostgresTemplate`; any other schema, say one a test emptied or changed, is
  dropped and migrated again). Creating a database from a template database would cost
  more than the migration it saves (two seconds a database, for its copy and checkpoint).

The tests of the migrations themselves (tests/migrations) run Alembic for real.
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from persona_agent.db import create_engine
from persona_agent.migrations import init_db
from persona_agent.migrations.tables import metadata
from persona_agent.settings import Settings

__all__ = ["DATA_DIR_FILE", "WORKER_SQLITE", "PostgresTemplate", "SqliteTemplate"]

SQLITE_FILE = "hub.db"
DATA_DIR_FILE = "persona-agent.db"
"""The hub's database file in its data directory (``Settings.resolved_database_url``)."""


class SqliteTemplate:
    """One migrated SQLite file, made at its first use in a directory of its own (removed
    when the process exits)."""

    def __init__(self) -> None:
        self._file: Path | None = None
        self._lock = threading.Lock()

    def ready(self) -> Path:
        """The migrated file, made now if it is not yet (in a thread of its own: the
        caller's event loop may be running)."""
        with self._lock:
            if self._file is None:
                directory = Path(tempfile.mkdtemp(prefix="persona-agent-migrated-"))
                atexit.register(shutil.rmtree, directory, ignore_errors=True)
                file = directory / SQLITE_FILE
                with ThreadPoolExecutor(1) as thread:
                    thread.submit(asyncio.run, _migrate(file)).result()
                self._file = file
            return self._file

    async def copy(self, directory: Path) -> AsyncEngine:
        """An engine on a copy of the migrated file, ``directory / "hub.db"``."""
        target = directory / SQLITE_FILE
        self.place(target)
        return create_engine(f"sqlite+aiosqlite:///{target}")

    def place(self, target: Path) -> None:
        """A copy of the migrated file at ``target`` (its directory made): a hub's database
        file, say, which the hub then finds at the newest revision and does not migrate."""
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.ready(), target)

    def under(self, settings: Settings) -> None:
        """The migrated file as the database of a hub of ``settings`` whose SQLite file is
        not there yet (a new data directory); nothing for any other database."""
        if settings.database_url is None:
            self.into(settings.data_dir)

    def into(self, data_dir: Path) -> None:
        """The migrated file as the database of a hub on ``data_dir`` (its default SQLite
        file, :data:`DATA_DIR_FILE`), unless the directory has one already."""
        target = data_dir / DATA_DIR_FILE
        if not target.exists():
            self.place(target)


WORKER_SQLITE = SqliteTemplate()
"""This process's migrated SQLite file (a pytest-xdist worker's: ``migrated_sqlite``)."""


async def _migrate(file: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{file}")
    try:
        await init_db(engine)
        async with engine.connect() as conn:
            # Everything in the file itself: a copy needs no -wal beside it.
            await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        await engine.dispose()
    for leftover in ("-wal", "-shm"):  # empty after the checkpoint; gone once closed
        file.with_name(file.name + leftover).unlink(missing_ok=True)


_SCHEMA = """
SELECT md5(string_agg(line, E'\\n' ORDER BY line)) FROM (
    SELECT 'class ' || c.relname || ' ' || c.relkind::text AS line
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
      FROM pg_attribute a
      JOIN pg_class c ON c.oid = a.attrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'constraint ' || c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
      FROM pg_constraint k
      JOIN pg_class c ON c.oid = k.conrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
    UNION ALL
    SELECT 'trigger ' || t.tgname FROM pg_trigger t
      JOIN pg_class c ON c.oid = t.tgrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND NOT t.tgisinternal
    UNION ALL
    SELECT 'function ' || p.proname FROM pg_proc p
      JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'schema ' || nspname FROM pg_namespace
     WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
) AS schema
"""
"""A digest of the database's schema: its relations, columns, constraints, indexes,
triggers, functions and schemas."""

_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"

_SEQUENCES = """
SELECT quote_ident(c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind = 'S' ORDER BY c.relname
"""


class PostgresTemplate:
    """The worker's PostgreSQL database brought back to a fresh migration for each test."""

    def __init__(self) -> None:
        self._fresh: tuple[str, list[str], tuple[object, ...]] | None = None
        """The fresh migration's schema digest, the statements that empty it, and its
        ``alembic_version`` rows; None until this worker migrated once."""

    async def reset(self, url: str) -> AsyncEngine:
        """An engine on ``url``'s database (this worker's own: no other process writes to
        it), as a fresh migration leaves it: migrated once, then emptied for each test."""
        engine = create_engine(url)
        try:
            if self._fresh is None or not await self._emptied(engine, self._fresh):
                await self._migrate(engine)
        except BaseException:
            await engine.dispose()
            raise
        return engine

    async def _migrate(self, engine: AsyncEngine) -> None:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.drop_all)
            await conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
        await init_db(engine)
        async with engine.connect() as conn:
            present = set((await conn.execute(text(_TABLES))).scalars()) - {"alembic_version"}
            # Children first, should a foreign key ever join two tables.
            known = [table.name for table in reversed(metadata.sorted_tables)]
            order = sorted(present - set(known)) + [name for name in known if name in present]
            deletes = [f'DELETE FROM "{name}"' for name in order]
            sequences = list((await conn.execute(text(_SEQUENCES))).scalars())
            deletes += [f"ALTER SEQUENCE {name} RESTART" for name in sequences]
            self._fresh = (await _digest(conn), deletes, await _versions(conn))

    async def _emptied(
        self, engine: AsyncEngine, fresh: tuple[str, list[str], tuple[object, ...]]
    ) -> bool:
        """Empty the database when its schema is the fresh migration's; whether it was."""
        digest, deletes, versions = fresh
        async with engine.begin() as conn:
            if await _digest(conn) != digest or await _versions(conn) != versions:
                return False
            await conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
            for statement in deletes:
                await conn.exec_driver_sql(statement)
        return True


async def _digest(conn: AsyncConnection) -> str:
    return str(await conn.scalar(text(_SCHEMA)))


async def _versions(conn: AsyncConnection) -> tuple[object, ...]:
    rows = await conn.execute(text("SELECT version_num FROM alembic_version ORDER BY 1"))
    return tuple(rows.scalars())
