from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.db import create_engine, database, init_db, metadata

POSTGRES_URL_VARIABLE = "PERSONA_AGENT_TEST_POSTGRES_URL"
POSTGRES_URL = os.environ.get(POSTGRES_URL_VARIABLE, "")
"""A PostgreSQL database the tests may empty (``.ci/run`` sets it), read before the
environment is cleaned for each test."""


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see none of the developer's or CI's LLM settings."""
    for name in list(os.environ):
        if name.startswith(("PERSONA_AGENT_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def local_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the whole run: the embedded model's file is assembled into it once."""
    return tmp_path_factory.mktemp("models")


POSTGRES_REQUIRED = os.environ.get("PERSONA_AGENT_TEST_POSTGRES_REQUIRED", "") == "1"
"""Set by ``.ci/run``: a PostgreSQL variant that cannot run fails instead of skipping."""


async def empty_postgres() -> str:
    """The URL of the test PostgreSQL database, the hub's tables dropped; skips without one
    (fails instead under ``PERSONA_AGENT_TEST_POSTGRES_REQUIRED=1``, as in CI)."""
    if not POSTGRES_URL:
        if POSTGRES_REQUIRED:
            pytest.fail(f"{POSTGRES_URL_VARIABLE} is not set, and PostgreSQL is required")
        pytest.skip(
            f"{POSTGRES_URL_VARIABLE} is not set: the PostgreSQL variant of this test needs "
            "a database it may empty, e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test "
            "(.ci/run sets it)"
        )
    engine = create_engine(POSTGRES_URL)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(metadata.drop_all)
    finally:
        await engine.dispose()
    return POSTGRES_URL


async def _fresh_engine(kind: str, directory: Path) -> AsyncEngine:
    if kind == "sqlite":
        engine = create_engine(f"sqlite+aiosqlite:///{directory / 'hub.db'}")
    else:
        engine = create_engine(await empty_postgres())
    await init_db(engine)
    return engine


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """A new, empty hub database: a SQLite file, and PostgreSQL (see POSTGRES_URL_VARIABLE)."""
    db = await _fresh_engine(request.param, tmp_path)
    yield db
    await database(db).aclose()
    await db.dispose()


@pytest.fixture
async def sqlite_engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """A new, empty hub database in a SQLite file (for what only SQLite has)."""
    db = await _fresh_engine("sqlite", tmp_path)
    yield db
    await database(db).aclose()
    await db.dispose()
