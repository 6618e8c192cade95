"""Empty PostgreSQL databases of a process's own, lent one at a time and emptied for the next.

Replicas need a database no other test touches: LISTEN/NOTIFY channels and advisory locks
are per database, so two tests on one would hear each other's notifications and wait on
each other's locks. A new database for each test gave that, but dropping one costs the
server a checkpoint (0.1 s on a quiet server, seconds while the suite's workers write).
So a process keeps a few databases beside the test database, named for it and for the
pytest-xdist worker (``test_gw0_pool0`` beside ``test``; ``test_pool0`` outside xdist), and
lends each to one borrower at a time. Before each loan the database is brought back to
what a new one was:

- every other session on it is ended and waited for (``pg_terminate_backend``): their
  listeners, advisory locks and open transactions end with them; notifications sent before
  are never delivered to a session that starts listening after;
- every schema but the system ones is dropped, and everything in ``public`` (tables with
  their rows, sequences, views, types, functions), large objects and extensions the new
  database did not have;
- then its catalogue (:data:`_CATALOGUE`: schemas and their owners and privileges,
  relations, types, functions, extensions, large objects, event triggers, publications,
  per-database settings, advisory locks, prepared transactions) must read as that of a
  new database, one made beside them and never used (``test_new``); any difference (a
  test granted something, say) and the database is dropped and created again. So is one
  that is gone (a test dropped it).

The databases stay after the process exits, as the worker's own test database does, and
the next run's worker empties them as it would for a test. Two pytest runs at once on one
server need different test databases (``PERSONA_AGENT_TEST_POSTGRES_URL``), as they do for
``test_gw0``.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from tests.migrated import PostgresTemplate

__all__ = ["EmptyDatabases", "pool_name"]

_T = TypeVar("_T")

_MAX_NAME = 63
"""PostgreSQL's longest identifier (a longer one is cut, and two names could meet)."""

_THERE_ALREADY = ("42P04", "23505")
"""duplicate_database, or unique_violation when another process created it meanwhile."""

_SESSIONS_ENDED_WITHIN = 30.0
"""Seconds the other sessions on a database may take to end before it is dropped instead
(with ``FORCE``): a safety bound, not an expectation."""

_USER_NAMESPACE = """
    n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
"""

_CATALOGUE = f"""
SELECT string_agg(line, E'\\n' ORDER BY line) FROM (
    SELECT 'schema ' || n.nspname || ' ' || n.nspowner::regrole::text || ' '
           || coalesce(n.nspacl::text, '') || ' '
           || coalesce(obj_description(n.oid, 'pg_namespace'), '') AS line
      FROM pg_namespace n WHERE {_USER_NAMESPACE}
    UNION ALL
    SELECT 'class ' || n.nspname || '.' || c.relname || ' ' || c.relkind::text
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_USER_NAMESPACE}
    UNION ALL
    SELECT 'type ' || n.nspname || '.' || t.typname
      FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {_USER_NAMESPACE}
    UNION ALL
    SELECT 'function ' || n.nspname || '.' || p.proname
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {_USER_NAMESPACE}
    UNION ALL
    SELECT 'operator ' || n.nspname || '.' || o.oprname
      FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace WHERE {_USER_NAMESPACE}
    UNION ALL
    SELECT 'collation ' || n.nspname || '.' || l.collname
      FROM pg_collation l JOIN pg_namespace n ON n.oid = l.collnamespace
     WHERE {_USER_NAMESPACE}
    UNION ALL
    SELECT 'extension ' || extname || ' ' || extversion FROM pg_extension
    UNION ALL
    SELECT 'large objects ' || count(*) FROM pg_largeobject_metadata
    UNION ALL
    SELECT 'event trigger ' || evtname FROM pg_event_trigger
    UNION ALL
    SELECT 'publication ' || pubname FROM pg_publication
    UNION ALL
    SELECT 'default privileges ' || defaclacl::text FROM pg_default_acl
    UNION ALL
    SELECT 'setting ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
     WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL
    SELECT 'advisory locks ' || count(*) FROM pg_locks
     WHERE locktype = 'advisory'
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
    UNION ALL
    SELECT 'prepared transactions ' || count(*) FROM pg_prepared_xacts
     WHERE database = current_database()
) AS catalogue
"""
"""What a new database holds, as lines of text: an emptied one must read the same."""

_DROPS = f"""
SELECT format('DROP EXTENSION IF EXISTS %I CASCADE', extname) FROM pg_extension
 WHERE extname <> 'plpgsql'
UNION ALL
SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', n.nspname) FROM pg_namespace n
 WHERE {_USER_NAMESPACE} AND n.nspname <> 'public'
UNION ALL
SELECT format('DROP %s IF EXISTS %I.%I CASCADE',
              CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                             WHEN 'S' THEN 'SEQUENCE' WHEN 'f' THEN 'FOREIGN TABLE'
                             ELSE 'TABLE' END,
              n.nspname, c.relname)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
UNION ALL
SELECT format('DROP TYPE IF EXISTS %I.%I CASCADE', n.nspname, t.typname)
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE n.nspname = 'public'
   AND (t.typtype IN ('e', 'd', 'r')
        OR EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind = 'c'))
UNION ALL
SELECT format('DROP ROUTINE IF EXISTS %s CASCADE', p.oid::regprocedure)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'public'
   AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
UNION ALL
SELECT format('DROP EVENT TRIGGER %I', evtname) FROM pg_event_trigger
UNION ALL
SELECT format('DROP PUBLICATION %I', pubname) FROM pg_publication
"""
"""The statements that drop what tests make: extensions, schemas of their own, and
everything in ``public`` (tables take their rows, indexes, triggers and owned sequences
with them)."""


def pool_name(database: str, worker: str, index: int, kind: str = "pool") -> str:
    """The name of the ``index``-th database of ``kind`` beside ``database`` of the
    pytest-xdist worker ``worker`` (or of a process outside xdist, ""): ``test_gw0_pool0``."""
    return _beside(database, f"{'_' + worker if worker else ''}_{kind}{index}")


def _beside(database: str, suffix: str) -> str:
    """``database`` + ``suffix``; a long one cut to PostgreSQL's 63 bytes with a digest of
    the whole, so that it stays its own."""
    if len((database + suffix).encode()) > _MAX_NAME:
        digest = hashlib.sha1(database.encode()).hexdigest()[:8]
        kept = database.encode()[: _MAX_NAME - len(suffix.encode()) - len(digest) - 1]
        database = f"{kept.decode(errors='ignore')}_{digest}"
    return database + suffix


def _run_async(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to its end in a thread of its own (a test's event loop may be
    running in this one)."""
    results: list[_T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(asyncio.run(factory()))
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=target, name="empty-databases")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


class EmptyDatabases:
    """This process's databases beside a test database, lent empty one at a time
    (:meth:`lend`)."""

    def __init__(self, worker: str) -> None:
        """``worker``: the pytest-xdist worker this process is (``gw0``), or ""."""
        self._worker = worker
        self._lock = threading.Lock()
        self._lent: set[str] = set()
        """Databases (by URL) lent now."""
        self._new: dict[str, str] = {}
        """The catalogue of a new database (:data:`_CATALOGUE`), per test database."""

    @contextmanager
    def lend(self, base_url: str) -> Iterator[str]:
        """The URL of a database beside ``base_url``'s, as empty as a new one and used by
        no one else until the block ends; ``base_url``'s database must exist (it is
        where the databases are created from)."""
        url = self._take(make_url(base_url), "pool")
        try:
            _run_async(lambda: self._empty(make_url(base_url), make_url(url)))
            yield url
        finally:
            with self._lock:
                self._lent.discard(url)

    @contextmanager
    def lend_migrated(self, base_url: str, template: PostgresTemplate) -> Iterator[str]:
        """As :meth:`lend`, a database as a fresh migration leaves it instead (of others,
        ``test_gw0_migrated0``): its other sessions ended, then ``template`` (tests/
        migrated.py) deletes its rows and restarts its sequences when its schema is the
        migration's, or migrates it again."""
        url = self._take(make_url(base_url), "migrated")
        try:
            _run_async(lambda: self._migrated(make_url(base_url), make_url(url), template))
            yield url
        finally:
            with self._lock:
                self._lent.discard(url)

    def _take(self, base: URL, kind: str) -> str:
        with self._lock:
            for index in range(1_000):
                name = pool_name(str(base.database), self._worker, index, kind)
                url = base.set(database=name).render_as_string(hide_password=False)
                if url not in self._lent:
                    self._lent.add(url)
                    return url
        raise RuntimeError("a thousand databases lent at once")  # pragma: no cover

    async def _empty(self, base: URL, url: URL) -> None:
        key = base.render_as_string(hide_password=False)
        if key not in self._new:
            self._new[key] = await _new_catalogue(base)
        if await _emptied(url) != self._new[key]:
            await _made_again(base, url)

    async def _migrated(self, base: URL, url: URL, template: PostgresTemplate) -> None:
        if not await _sessions_ended(url):
            await _made_again(base, url)
        engine = await template.reset(url.render_as_string(hide_password=False))
        await engine.dispose()


async def _made_again(base: URL, url: URL) -> None:
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
            await conn.execute(text(f'CREATE DATABASE "{url.database}"'))
    finally:
        await admin.dispose()


async def _sessions_ended(url: URL) -> bool:
    """End the other sessions on the database; whether it is there and they ended within
    :data:`_SESSIONS_ENDED_WITHIN`."""
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn, asyncio.timeout(_SESSIONS_ENDED_WITHIN):
            while await _ending(conn):
                pass
    except (OSError, DBAPIError, TimeoutError):
        return False
    finally:
        await engine.dispose()
    return True


async def _new_catalogue(base: URL) -> str:
    """The catalogue of a new database: of ``test_new`` beside ``base``'s ``test``, made
    now unless it is there (by another worker, or an earlier run: no one connects to it but
    to read it)."""
    new = base.set(database=_beside(str(base.database), "_new"))
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with admin.connect() as conn:
            try:
                await conn.execute(text(f'CREATE DATABASE "{new.database}"'))
            except DBAPIError as error:  # there already
                if getattr(error.orig, "sqlstate", None) not in _THERE_ALREADY:
                    raise
    finally:
        await admin.dispose()
    engine = create_async_engine(new, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return str(await conn.scalar(text(_CATALOGUE)))
    finally:
        await engine.dispose()


async def _emptied(url: URL) -> str | None:
    """End the other sessions on the database and drop what tests made on it; its
    catalogue then. None when it is gone, a session would not end within
    :data:`_SESSIONS_ENDED_WITHIN` or something could not be dropped: it is made again."""
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            async with asyncio.timeout(_SESSIONS_ENDED_WITHIN):
                while await _ending(conn):
                    pass
            async with conn.begin():  # one commit: one flush of the log
                await conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
                for statement in list((await conn.execute(text(_DROPS))).scalars()):
                    await conn.exec_driver_sql(statement)
                await conn.exec_driver_sql("SELECT lo_unlink(oid) FROM pg_largeobject_metadata")
            return str(await conn.scalar(text(_CATALOGUE)))
    except (OSError, DBAPIError, TimeoutError):
        return None
    finally:
        await engine.dispose()


async def _ending(conn: AsyncConnection) -> bool:
    """Whether other sessions were on the database; each is ended and waited for (up to
    5 s each), in a transaction of its own (pg_stat_activity is read once a transaction:
    a session that started meanwhile is seen by the next)."""
    async with conn.begin():
        ended = await conn.execute(
            text(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        )
        return bool(ended.all())
