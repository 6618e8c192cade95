"""The ``engine`` fixture's databases (tests/migrated.py) are each exactly a fresh migration."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.db import create_engine
from persona_agent.migrations import init_db
from persona_agent.settings import Settings
from tests.conftest import empty_postgres
from tests.migrated import DATA_DIR_FILE, PostgresTemplate, SqliteTemplate

_A_USAGE_ROW = (
    "INSERT INTO pa_usage (persona_id, model, at_ms, prompt_tokens, completion_tokens, "
    "cached_prompt_tokens) VALUES ('p', 'm', 0, 1, 2, 0)"
)
"""A row a test writes (and a sequence it advances)."""


async def _sqlite_contents(engine: AsyncEngine) -> list[tuple[object, ...]]:
    async with engine.connect() as conn:
        schema = [
            tuple(row)
            for row in await conn.exec_driver_sql(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
            )
        ]
        tables = [str(name) for kind, name, _, _ in schema if kind == "table"]
        rows = [
            (name, *row)
            for name in tables
            for row in (await conn.exec_driver_sql(f'SELECT * FROM "{name}"')).all()
        ]
        mode = (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar()
    return [*schema, *rows, ("journal_mode", mode)]


async def test_a_sqlite_copy_is_a_fresh_migration_each_time(tmp_path: Path) -> None:
    fresh = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}")
    await init_db(fresh)
    template = SqliteTemplate()
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = await template.copy(tmp_path / "first")
    try:
        assert await _sqlite_contents(first) == await _sqlite_contents(fresh)
        async with first.begin() as conn:
            await conn.exec_driver_sql(_A_USAGE_ROW)
        second = await template.copy(tmp_path / "second")
        try:
            assert await _sqlite_contents(second) == await _sqlite_contents(fresh)
        finally:
            await second.dispose()
    finally:
        await first.dispose()
        await fresh.dispose()


async def _postgres_contents(engine: AsyncEngine) -> tuple[object, ...]:
    async with engine.connect() as conn:
        tables = (
            await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
            )
        ).scalars()
        rows = [
            (name, *row)
            for name in list(tables)
            for row in (await conn.exec_driver_sql(f'SELECT * FROM "{name}"')).all()
        ]
        sequences = (
            await conn.execute(
                text(
                    "SELECT sequencename, last_value FROM pg_sequences "
                    "WHERE schemaname = 'public' ORDER BY 1"
                )
            )
        ).all()
    return tuple(rows), tuple(map(tuple, sequences))


async def test_a_postgres_database_is_emptied_back_to_a_fresh_migration() -> None:
    url = await empty_postgres()
    fresh = create_engine(url)
    try:
        await init_db(fresh)
        expected = await _postgres_contents(fresh)
        assert expected[1]  # sequences there, none used yet
    finally:
        await fresh.dispose()
    template = PostgresTemplate()
    first = await template.reset(url)
    try:
        async with first.begin() as conn:
            await conn.exec_driver_sql(_A_USAGE_ROW)
        assert await _postgres_contents(first) != expected
    finally:
        await first.dispose()
    second = await template.reset(url)
    try:
        assert await _postgres_contents(second) == expected
        async with second.begin() as conn:  # a test that changes the schema
            await conn.exec_driver_sql("DROP INDEX ix_pa_usage_persona_at")
    finally:
        await second.dispose()
    third = await template.reset(url)
    try:
        assert await _postgres_contents(third) == expected
        async with third.connect() as conn:
            indexes = (
                await conn.exec_driver_sql(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'pa_usage'"
                )
            ).scalars()
            assert "ix_pa_usage_persona_at" in set(indexes)
    finally:
        await third.dispose()


def test_a_hub_s_data_directory_file_is_the_one_the_settings_name(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    assert settings.resolved_database_url.endswith(f"/{DATA_DIR_FILE}")
    SqliteTemplate().under(settings)
    assert (tmp_path / DATA_DIR_FILE).stat().st_size > 0
