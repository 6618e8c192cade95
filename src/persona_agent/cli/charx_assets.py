"""The CHARX assets of a persona for the CLI's import and export: kept in the hub's
database (:mod:`persona_agent.personas.stores.asset_store`), as the hub keeps those of an
upload, so that ``import-persona x.charx`` and ``export-persona --charx`` keep them too."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from persona_agent.db.database import sqlite_file_path
from persona_agent.personas.formats.charx import CharxAsset
from persona_agent.settings import Settings

__all__ = ["keep_assets", "kept_assets"]

_ASSETS_REVISION = "0014"
"""The schema revision that made the assets' table."""


def keep_assets(settings: Settings, persona_id: str, assets: Sequence[CharxAsset]) -> None:
    """Make ``assets`` the persona's (none: it has none), in the hub's database, brought to
    the newest schema first as the hub would at its start.

    Raises:
        ConfigError, OSError, SQLAlchemyError: the database cannot be reached or migrated.
        persona_agent.db.DatabaseError: the assets could not be written.
    """
    if not assets and not _database_there(settings):
        return  # nothing to keep, nothing to clear: no database made for it

    async def keep() -> None:
        from persona_agent.db import GroupCommitWriter, create_engine
        from persona_agent.migrations import prepare_db
        from persona_agent.personas.stores.asset_store import PersonaAssets

        engine = create_engine(settings.resolved_database_url)
        try:
            await prepare_db(engine, auto_upgrade=settings.db_auto_upgrade)
            writer = GroupCommitWriter(engine)
            try:
                await PersonaAssets(writer).replace(persona_id, assets)
            finally:
                await writer.aclose()
        finally:
            await engine.dispose()

    asyncio.run(keep())


def kept_assets(settings: Settings, persona_id: str) -> list[CharxAsset]:
    """The persona's assets kept in the hub's database (none when there is no database,
    or it has not the schema that keeps them: nothing is made or migrated to read)."""
    if not _database_there(settings):
        return []

    async def read() -> list[CharxAsset]:
        from persona_agent.db import GroupCommitWriter, create_engine
        from persona_agent.migrations import db_revision
        from persona_agent.personas.stores.asset_store import PersonaAssets

        engine = create_engine(settings.resolved_database_url)
        try:
            current, _ = await db_revision(engine)
            if current is None or current < _ASSETS_REVISION:
                return []
            writer = GroupCommitWriter(engine)
            try:
                return await PersonaAssets(writer).of(persona_id)
            finally:
                await writer.aclose()
        finally:
            await engine.dispose()

    return asyncio.run(read())


def _database_there(settings: Settings) -> bool:
    """Whether the hub's database may hold something: a server's, or a SQLite file that is
    there (an export reads none into being)."""
    path = sqlite_file_path(settings.resolved_database_url)
    if path is not None:
        return Path(path).is_file()
    from sqlalchemy.engine import make_url  # another database, or a form only it reads

    url = make_url(settings.resolved_database_url)
    if url.get_backend_name() != "sqlite":
        return True
    return url.database not in (None, "", ":memory:") and Path(url.database).is_file()
