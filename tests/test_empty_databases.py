"""The replica tests' databases (tests/servers/empty_databases.py) are lent as empty as new:
nothing of the borrower before (sessions, listeners, advisory locks, tables, rows,
sequences, schemas, types, functions) is left for the next, and no two borrowers share
one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from tests.conftest import worker_postgres
from tests.migrated import PostgresTemplate
from tests.servers.empty_databases import EmptyDatabases, pool_name

_PROBE = "probe"
_CHANNEL = "pa_pool_probe"
_OID = "SELECT oid FROM pg_database WHERE datname = current_database()"

_LEFT_BEHIND = [
    "CREATE SEQUENCE counter",
    "SELECT nextval('counter')",
    "CREATE TABLE kept (id serial PRIMARY KEY, note text)",
    "INSERT INTO kept (note) VALUES ('left behind')",
    "CREATE SCHEMA own",
    "CREATE TABLE own.inside (id int)",
    "CREATE TYPE mood AS ENUM ('calm')",
    "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "SELECT pg_advisory_lock(47)",
    f"LISTEN {_CHANNEL}",
]
"""What a borrower leaves: objects, a row, a sequence advanced, a session holding a lock
and listening (as a replica that was killed would)."""


@pytest.fixture
async def pool() -> AsyncIterator[EmptyDatabases]:
    """A pool of the test's own (its databases ``..._probe_pool<N>`` beside the worker's),
    whose databases are dropped afterwards."""
    yield EmptyDatabases(_PROBE)
    base = make_url(await worker_postgres())
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with admin.connect() as conn:
            made = await conn.execute(
                text("SELECT datname FROM pg_database WHERE starts_with(datname, :prefix)"),
                {"prefix": f"{base.database}_{_PROBE}_"},
            )
            for (name,) in made.all():
                await conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


async def _gone(conn: AsyncConnection) -> bool:
    try:
        await conn.execute(text("SELECT 1"))
    except DBAPIError:
        return True
    return False


async def test_a_database_is_lent_again_as_empty_as_new(pool: EmptyDatabases) -> None:
    base = await worker_postgres()
    with pool.lend(base) as first:
        before = create_async_engine(first, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        left = await before.connect()
        made = await left.scalar(text(_OID))
        for statement in _LEFT_BEHIND:
            await left.execute(text(statement))
        heard: list[Any] = []
        driver = (await left.get_raw_connection()).driver_connection
        assert driver is not None
        await driver.add_listener(_CHANNEL, lambda *args: heard.append(args))
    try:
        with pool.lend(base) as second:
            assert second == first
            assert await _gone(left)  # its session ended: its lock and listening with it
            after = create_async_engine(second, isolation_level="AUTOCOMMIT", poolclass=NullPool)
            try:
                async with after.connect() as conn:
                    relations = await conn.scalar(
                        text(
                            "SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE n.nspname NOT LIKE 'pg\\_%' "
                            "AND n.nspname <> 'information_schema'"
                        )
                    )
                    assert relations == 0
                    # Emptied, not made again (which would cost a checkpoint).
                    assert await conn.scalar(text(_OID)) == made
                    for name in ("to_regnamespace('own')", "to_regtype('mood')", "to_regproc('f')"):
                        assert await conn.scalar(text(f"SELECT {name}")) is None
                    assert await conn.scalar(text("SELECT pg_try_advisory_lock(47)")) is True
                    await conn.execute(text(f"NOTIFY {_CHANNEL}, 'after'"))
                    await asyncio.sleep(0.1)
                    assert heard == []
            finally:
                await after.dispose()
    finally:
        await before.dispose()


async def test_borrowers_at_once_get_databases_of_their_own(pool: EmptyDatabases) -> None:
    base = await worker_postgres()
    with pool.lend(base) as first, pool.lend(base) as second:
        assert first != second
        one = create_async_engine(first, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        other = create_async_engine(second, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        try:
            async with one.connect() as conn:
                await conn.execute(text("CREATE TABLE mine (id int)"))
            async with other.connect() as conn:
                assert await conn.scalar(text("SELECT to_regclass('mine')")) is None
        finally:
            await one.dispose()
            await other.dispose()


async def test_a_database_a_test_dropped_is_made_again(pool: EmptyDatabases) -> None:
    base = await worker_postgres()
    with pool.lend(base) as first:
        name = make_url(first).database
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()
    with pool.lend(base) as again:
        engine = create_async_engine(again, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                assert await conn.scalar(text("SELECT current_database()")) == name
        finally:
            await engine.dispose()


async def test_a_migrated_database_is_lent_again_as_a_fresh_migration(
    pool: EmptyDatabases,
) -> None:
    base = await worker_postgres()
    template = PostgresTemplate()
    with pool.lend_migrated(base, template) as first:
        assert "_probe_migrated" in first
        before = create_async_engine(first, isolation_level="AUTOCOMMIT", poolclass=NullPool)
        left = await before.connect()
        made = await left.scalar(text(_OID))
        version = await left.scalar(text("SELECT version_num FROM alembic_version"))
        await left.execute(
            text(
                "INSERT INTO pa_usage (persona_id, model, at_ms, prompt_tokens, "
                "completion_tokens, cached_prompt_tokens) "
                "VALUES ('p', 'm', 0, 1, 2, 0)"
            )
        )
        await left.execute(text("SELECT pg_advisory_lock(47)"))
    try:
        with pool.lend_migrated(base, template) as second:
            assert second == first
            assert await _gone(left)
            after = create_async_engine(second, isolation_level="AUTOCOMMIT", poolclass=NullPool)
            try:
                async with after.connect() as conn:
                    assert await conn.scalar(text(_OID)) == made  # emptied, not made again
                    assert await conn.scalar(text("SELECT count(*) FROM pa_usage")) == 0
                    assert (
                        await conn.scalar(text("SELECT version_num FROM alembic_version"))
                        == version
                    )
                    assert await conn.scalar(text("SELECT pg_try_advisory_lock(47)")) is True
            finally:
                await after.dispose()
    finally:
        await before.dispose()


def test_each_test_database_and_worker_has_its_own_names() -> None:
    assert pool_name("test", "gw0", 0) == "test_gw0_pool0"
    assert pool_name("test_suite", "gw0", 0) == "test_suite_gw0_pool0"
    assert pool_name("test", "", 1) == "test_pool1"
    assert pool_name("test", "gw2", 0, "migrated") == "test_gw2_migrated0"
    long, longer = "t" * 60, "t" * 59 + "u"
    names = {pool_name(long, "gw12", 0), pool_name(longer, "gw12", 0), pool_name(long, "gw1", 0)}
    assert len(names) == 3
    assert all(len(name.encode()) <= 63 for name in names)
