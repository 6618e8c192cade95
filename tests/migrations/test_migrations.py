"""Schema migrations (Alembic), on a SQLite file and PostgreSQL: from an empty database, from
the schema before replicas, from a database made before migrations; replicas migrating at
once; the start-up check; the ``persona-agent db`` commands; every table the sources define
seen by the migrations."""

from __future__ import annotations

import ast
import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine
from typer.testing import CliRunner

from persona_agent.cli import app
from persona_agent.db import create_engine
from persona_agent.errors import ConfigError
from persona_agent.migrations import (
    MIGRATION_LOCK_KEY,
    SCHEMA_REVISION,
    db_revision,
    prepare_db,
    revisions,
    upgrade_db,
)
from persona_agent.migrations.tables import TABLES, metadata
from tests.conftest import empty_postgres

HEAD = "0014"
SRC = Path(__file__).resolve().parents[2] / "src" / "persona_agent"
NOT_OURS = {"alembic_version", "push_notification_configs"}  # Alembic's, and the SDK's


async def empty_database(kind: str, directory: Path) -> AsyncEngine:
    if kind == "sqlite":
        return create_engine(f"sqlite+aiosqlite:///{directory / 'hub.db'}")
    return create_engine(await empty_postgres())


def defined_tables() -> dict[str, str]:
    """Each table the sources define (``Table("pa_...", metadata, ...)``) and its module."""
    found: dict[str, str] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Table"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                found[str(node.args[0].value)] = path.relative_to(SRC).as_posix()
    return found


def test_the_migrations_see_every_table_beside_its_store() -> None:
    """A table is defined beside the store that owns it; the migrations import each one
    (``migrations/tables.py``), so Alembic and these tests compare all of them."""
    defined = defined_tables()
    assert set(defined) == set(metadata.tables) == {table.name for table in TABLES}, defined


@pytest.fixture(params=["sqlite", "postgresql"])
async def empty(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An engine on an empty database, without even ``alembic_version``."""
    engine = await empty_database(request.param, tmp_path)
    yield engine
    await engine.dispose()


def _only_ours(
    _obj: object, name: str | None, type_: str, _reflected: bool, _compare_to: object
) -> bool:
    return not (type_ == "table" and name in NOT_OURS)


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection,
        opts={"include_object": _only_ours, "compare_type": True, "compare_server_default": True},
    )
    return list(compare_metadata(context, metadata))


async def schema_differences(engine: AsyncEngine) -> list[Any]:
    """What the database's schema lacks or has more than :data:`metadata` (none: the same)."""
    async with engine.connect() as conn:
        return await conn.run_sync(_differences)


async def save_old_task(engine: AsyncEngine) -> None:
    """A task and a message as the hub wrote them before replicas."""
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO pa_tasks (owner, id, context_id, state, sort_ts, data) "
                "VALUES ('ada:alice', 't1', 'c1', 3, 42, :data)"
            ),
            {"data": b"\x0a\x02t1"},
        )
        await conn.execute(
            text("INSERT INTO pa_messages (conversation, message) VALUES ('ada:c1', '{}')")
        )


async def assert_old_task_kept(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        tasks = (
            await conn.execute(text("SELECT id, sort_ts, data, version, replica FROM pa_tasks"))
        ).all()
        messages = (await conn.execute(text("SELECT conversation FROM pa_messages"))).all()
    assert [tuple(row) for row in tasks] == [("t1", 42, b"\x0a\x02t1", 0, None)]
    assert [tuple(row) for row in messages] == [("ada:c1",)]


async def test_an_empty_database_gets_exactly_the_tables_of_metadata(
    empty: AsyncEngine,
) -> None:
    assert await db_revision(empty) == (None, HEAD)
    await upgrade_db(empty)
    assert await db_revision(empty) == (HEAD, HEAD)
    assert await schema_differences(empty) == []
    await upgrade_db(empty)  # at head already: nothing to do
    assert await schema_differences(empty) == []


async def test_the_schema_before_replicas_upgrades_with_its_rows(empty: AsyncEngine) -> None:
    await upgrade_db(empty, "0001")
    assert await db_revision(empty) == ("0001", HEAD)
    await save_old_task(empty)
    await upgrade_db(empty)
    assert await db_revision(empty) == (HEAD, HEAD)
    await assert_old_task_kept(empty)
    assert await schema_differences(empty) == []


async def test_a_database_made_before_migrations_is_taken_over(empty: AsyncEngine) -> None:
    await upgrade_db(empty, "0001")  # the tables create_all made, before replicas
    async with empty.begin() as conn:
        await conn.execute(text("DROP TABLE alembic_version"))
    await save_old_task(empty)
    assert await db_revision(empty) == (None, HEAD)
    await upgrade_db(empty)
    assert await db_revision(empty) == (HEAD, HEAD)
    await assert_old_task_kept(empty)
    assert await schema_differences(empty) == []


async def test_a_database_made_by_create_all_of_today_is_taken_over(empty: AsyncEngine) -> None:
    async with empty.begin() as conn:
        await conn.run_sync(metadata.create_all)
    await upgrade_db(empty)
    assert await db_revision(empty) == (HEAD, HEAD)
    assert await schema_differences(empty) == []


async def test_down_to_the_schema_before_replicas_and_up_again(empty: AsyncEngine) -> None:
    await upgrade_db(empty, "0001")
    await save_old_task(empty)
    await upgrade_db(empty)
    async with revisions.one_at_a_time(), empty.begin() as conn:
        await conn.run_sync(revisions.downgrade, "0001")
    assert await db_revision(empty) == ("0001", HEAD)
    await upgrade_db(empty)
    await assert_old_task_kept(empty)
    assert await schema_differences(empty) == []


async def memory_indexes(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        found = await conn.run_sync(lambda c: inspect(c).get_indexes("pa_memories"))
    return {str(index["name"]) for index in found}


async def test_0009_indexes_memories_by_owner_and_goes_down_again(empty: AsyncEngine) -> None:
    await upgrade_db(empty, "0008")
    async with empty.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO pa_memories (persona_id, owner, conversation, role, text, model, "
                "vector, at_ms) VALUES ('ada', 'key:alice', 'c1', 'user', 'hi', 'm', :v, 1)"
            ),
            {"v": b"\0" * 8},
        )
    assert "ix_pa_memories_owner" not in await memory_indexes(empty)
    await upgrade_db(empty, "0009")
    assert await db_revision(empty) == ("0009", HEAD)
    assert "ix_pa_memories_owner" in await memory_indexes(empty)
    if empty.dialect.name == "sqlite":  # forgetting a caller reads the index, not the table
        async with empty.connect() as conn:
            plan = " ".join(
                str(row[-1])
                for row in await conn.execute(
                    text("EXPLAIN QUERY PLAN DELETE FROM pa_memories WHERE owner = 'key:alice'")
                )
            )
        assert "USING INDEX ix_pa_memories_owner" in plan, plan
    async with revisions.one_at_a_time(), empty.begin() as conn:
        await conn.run_sync(revisions.downgrade, "0008")
    assert await db_revision(empty) == ("0008", HEAD)
    assert "ix_pa_memories_owner" not in await memory_indexes(empty)
    await upgrade_db(empty)
    assert await schema_differences(empty) == []
    async with empty.connect() as conn:
        owners = (await conn.execute(text("SELECT owner FROM pa_memories"))).all()
    assert [row[0] for row in owners] == ["key:alice"]  # the rows stay, up and down


async def test_0011_adds_the_user_personas_and_goes_down_again(empty: AsyncEngine) -> None:
    before = "0010"  # the revision 0011 revises
    await upgrade_db(empty, before)

    async def tables() -> list[str]:
        async with empty.connect() as conn:
            return await conn.run_sync(lambda c: inspect(c).get_table_names())

    assert "pa_user_personas" not in await tables()
    await upgrade_db(empty)
    assert "pa_user_personas" in await tables()
    async with empty.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO pa_user_personas (scope, name, description, at_ms) "
                "VALUES ('caller:key:ann', 'Ann', 'A botanist.', 1)"
            )
        )
    assert await schema_differences(empty) == []
    async with revisions.one_at_a_time(), empty.begin() as conn:
        await conn.run_sync(revisions.downgrade, before)
    assert await db_revision(empty) == (before, HEAD)
    assert "pa_user_personas" not in await tables()
    await upgrade_db(empty)
    assert await schema_differences(empty) == []


async def test_0012_adds_the_media_and_goes_down_again(empty: AsyncEngine) -> None:
    before = "0011"  # the revision 0012 revises
    await upgrade_db(empty, before)

    async def tables() -> list[str]:
        async with empty.connect() as conn:
            return await conn.run_sync(lambda c: inspect(c).get_table_names())

    assert "pa_media" not in await tables()
    await upgrade_db(empty)
    assert "pa_media" in await tables()
    async with empty.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO pa_media (conversation, sha256, media_type, bytes, width, height, "
                "data, created_ms) VALUES ('ada:c1', :sha, 'image/png', 3, 1, 1, :data, 1)"
            ),
            {"sha": "a" * 64, "data": b"png"},
        )
    assert await schema_differences(empty) == []
    async with revisions.one_at_a_time(), empty.begin() as conn:
        await conn.run_sync(revisions.downgrade, before)
    assert await db_revision(empty) == (before, HEAD)
    assert "pa_media" not in await tables()
    await upgrade_db(empty)
    assert await schema_differences(empty) == []


async def test_0013_adds_the_prompts_and_goes_down_again(empty: AsyncEngine) -> None:
    before = "0012"  # the revision 0013 revises
    await upgrade_db(empty, before)

    async def tables() -> list[str]:
        async with empty.connect() as conn:
            return await conn.run_sync(lambda c: inspect(c).get_table_names())

    assert "pa_prompts" not in await tables()
    await upgrade_db(empty)
    assert "pa_prompts" in await tables()
    async with empty.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO pa_prompts (conversation, message_id, record, created_ms) "
                "VALUES ('ada:c1', 2, '{}', 1)"
            )
        )
    assert await schema_differences(empty) == []
    async with revisions.one_at_a_time(), empty.begin() as conn:
        await conn.run_sync(revisions.downgrade, before)
    assert await db_revision(empty) == (before, HEAD)
    assert "pa_prompts" not in await tables()
    await upgrade_db(empty)
    assert await schema_differences(empty) == []


async def test_0014_adds_the_persona_assets_and_goes_down_again(empty: AsyncEngine) -> None:
    before = "0013"  # the revision 0014 revises
    await upgrade_db(empty, before)

    async def tables() -> list[str]:
        async with empty.connect() as conn:
            return await conn.run_sync(lambda c: inspect(c).get_table_names())

    assert "pa_persona_assets" not in await tables()
    await upgrade_db(empty)
    assert "pa_persona_assets" in await tables()
    assert await schema_differences(empty) == []
    async with revisions.one_at_a_time(), empty.begin() as conn:
        await conn.run_sync(revisions.downgrade, before)
    assert await db_revision(empty) == (before, HEAD)
    assert "pa_persona_assets" not in await tables()
    await upgrade_db(empty)
    assert await schema_differences(empty) == []


async def test_0010_stamps_messages_and_keeps_alternatives_and_goes_down_again(
    empty: AsyncEngine,
) -> None:
    await upgrade_db(empty, "0009")
    async with empty.begin() as conn:
        await conn.execute(
            text("INSERT INTO pa_messages (conversation, message) VALUES ('ada:c1', '{}')")
        )
    await upgrade_db(empty)
    assert await db_revision(empty) == (HEAD, HEAD)
    async with empty.begin() as conn:
        rows = (await conn.execute(text("SELECT message, at_ms FROM pa_messages"))).all()
        await conn.execute(
            text(
                "INSERT INTO pa_swipes (conversation, anchor, position, messages, at_ms) "
                "VALUES ('ada:c1', 0, 0, NULL, 1)"
            )
        )
    assert [tuple(row) for row in rows] == [("{}", None)]  # stored before: no time
    assert await schema_differences(empty) == []
    async with revisions.one_at_a_time(), empty.begin() as conn:
        await conn.run_sync(revisions.downgrade, "0009")
    async with empty.connect() as conn:
        tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
        columns = await conn.run_sync(lambda c: inspect(c).get_columns("pa_messages"))
        left = (await conn.execute(text("SELECT message FROM pa_messages"))).all()
    assert "pa_swipes" not in tables
    assert "at_ms" not in {column["name"] for column in columns}
    assert [row[0] for row in left] == ["{}"]


async def test_replicas_starting_at_once_all_migrate(tmp_path: Path) -> None:
    url = await empty_postgres()
    engines = [create_engine(url) for _ in range(3)]
    try:
        async with asyncio.timeout(60):
            await asyncio.gather(*(upgrade_db(engine) for engine in engines))
        for engine in engines:
            assert await db_revision(engine) == (HEAD, HEAD)
        assert await schema_differences(engines[0]) == []
    finally:
        for engine in engines:
            await engine.dispose()


async def test_a_replica_waits_while_another_holds_the_migration_lock() -> None:
    url = await empty_postgres()
    holder, starting = create_engine(url), create_engine(url)
    try:
        async with holder.connect() as conn:
            await conn.execute(text(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})"))
            upgrading = asyncio.ensure_future(upgrade_db(starting))
            # Until PostgreSQL shows the other session waiting for the lock: no clock.
            waiting = text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            )
            async with asyncio.timeout(60):
                while not await conn.scalar(waiting):
                    assert not upgrading.done(), upgrading
                    await asyncio.sleep(0.02)
            assert not upgrading.done()  # waiting for the lock
            assert await db_revision(holder) == (None, HEAD)
            await conn.execute(text(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})"))
            async with asyncio.timeout(30):
                await upgrading
        assert await db_revision(holder) == (HEAD, HEAD)
    finally:
        await holder.dispose()
        await starting.dispose()


async def test_replica_processes_starting_at_once_all_migrate(tmp_path: Path) -> None:
    url = await empty_postgres()
    environment = {**os.environ, "PERSONA_AGENT_DATABASE_URL": url}
    command = [sys.executable, "-m", "persona_agent.cli", "db", "upgrade"]
    processes = [
        await asyncio.create_subprocess_exec(
            *command,
            env=environment,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(3)
    ]
    async with asyncio.timeout(120):
        outputs = await asyncio.gather(*(process.communicate() for process in processes))
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err.decode()
        assert f"revision after: {HEAD}" in out.decode()
    engine = create_engine(url)
    try:
        assert await db_revision(engine) == (HEAD, HEAD)
    finally:
        await engine.dispose()


async def test_start_up_without_auto_upgrade_refuses_an_old_database(
    empty: AsyncEngine,
) -> None:
    await upgrade_db(empty, "0001")
    with pytest.raises(ConfigError, match="persona-agent db upgrade"):
        await prepare_db(empty, auto_upgrade=False)
    assert await db_revision(empty) == ("0001", HEAD)  # left as it was
    await prepare_db(empty, auto_upgrade=True)
    assert await db_revision(empty) == (HEAD, HEAD)
    await prepare_db(empty, auto_upgrade=False)  # at head: starts


async def test_a_database_migrated_by_a_newer_version_is_refused(tmp_path: Path) -> None:
    engine = await empty_database("sqlite", tmp_path)
    try:
        await upgrade_db(engine)
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(ConfigError, match=r"9999.*newer persona-agent"):
            await upgrade_db(engine)
        with pytest.raises(ConfigError, match="persona-agent db upgrade"):
            await prepare_db(engine, auto_upgrade=False)
    finally:
        await engine.dispose()


def test_the_db_commands_upgrade_and_show_the_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    monkeypatch.setenv("PERSONA_AGENT_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    runner = CliRunner()

    before = runner.invoke(app, ["db", "current"])
    assert before.exit_code == 1
    assert "current: none" in before.stdout
    assert f"head: {HEAD}" in before.stdout
    assert "persona-agent db upgrade" in before.stderr

    upgraded = runner.invoke(app, ["db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output
    assert "revision before: none" in upgraded.stdout
    assert f"revision after: {HEAD}" in upgraded.stdout

    after = runner.invoke(app, ["db", "current"])
    assert after.exit_code == 0, after.output
    assert f"current: {HEAD}" in after.stdout

    again = runner.invoke(app, ["db", "upgrade"])
    assert again.exit_code == 0, again.output
    assert f"revision before: {HEAD}" in again.stdout


def test_the_db_commands_name_a_database_that_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(
        "PERSONA_AGENT_DATABASE_URL", "postgresql+asyncpg://hub:s3cret@127.0.0.1:1/hub"
    )
    result = CliRunner().invoke(app, ["db", "current"])
    assert result.exit_code == 1
    assert "the database did not answer" in result.stderr
    assert "s3cret" not in result.output


def test_the_revision_start_up_checks_first_is_the_newest() -> None:
    """``prepare_db`` skips Alembic when the database says SCHEMA_REVISION: it must be the
    head of ``versions/``, or a new revision would never run."""
    assert revisions.head_revision() == SCHEMA_REVISION
