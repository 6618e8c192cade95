"""The database's schema migrations: a hub's database brought to the newest schema, or checked.

The revisions are Alembic's, in ``versions/``, run by :mod:`persona_agent.migrations.revisions`
(with no alembic.ini). This module is what the hub and the ``persona-agent db`` commands call;
it imports Alembic only when a migration, or the revision Alembic reads, is needed, so a
start-up whose database is at :data:`SCHEMA_REVISION` already does without it, and on a
SQLite file without SQLAlchemy too (the revision read through the hub's writer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from persona_agent.db import DatabaseError, GroupCommitWriter, Sql
from persona_agent.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "MIGRATION_LOCK_KEY",
    "SCHEMA_REVISION",
    "db_revision",
    "init_db",
    "prepare_db",
    "upgrade_db",
]

SCHEMA_REVISION = "0014"
"""The newest revision of ``persona_agent/migrations/versions`` (a test keeps it so)."""


_REVISION = Sql("SELECT version_num FROM alembic_version", table="alembic_version")


async def _at_revision(database: GroupCommitWriter | AsyncEngine, revision: str) -> bool:
    """Whether the database's ``alembic_version`` says ``revision`` (no such table: no)."""
    writer = database if isinstance(database, GroupCommitWriter) else GroupCommitWriter(database)
    try:
        found = await writer.fetch(_REVISION)
    except DatabaseError:
        return False
    finally:
        if writer is not database:
            await writer.aclose()
    return [row[0] for row in found] == [revision]


MIGRATION_LOCK_KEY = 0x7065_7273_6F6E_6121  # "persona!" in ASCII
"""The PostgreSQL advisory lock a migrating hub holds (:func:`upgrade_db`)."""


async def init_db(engine: AsyncEngine) -> None:
    """Bring the database to the newest schema, as :func:`upgrade_db`."""
    await upgrade_db(engine)


async def upgrade_db(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate the database up to ``revision`` (``persona_agent/migrations/versions``).

    The tables of a database made before migrations (by ``create_all``, without
    ``alembic_version``) are taken over as they are. Safe for many hubs starting at once
    on one PostgreSQL database: the migrating connection holds the advisory lock
    :data:`MIGRATION_LOCK_KEY` from before it reads the revision until the migration is
    committed, so the others wait, then find the database migrated. On PostgreSQL the
    revisions run in one transaction; on SQLite, one each.

    Raises:
        ConfigError: the database is at a revision this version does not know (a newer
            persona-agent migrated it), or ``revision`` is not one.
    """
    from alembic.util import CommandError
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from persona_agent.migrations import revisions

    async with engine.connect() as conn:
        postgres = conn.dialect.name == "postgresql"
        try:
            if postgres:
                await conn.execute(text(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})"))
            async with revisions.one_at_a_time():
                await conn.run_sync(revisions.upgrade, revision)
            await conn.commit()
        except CommandError as error:
            raise ConfigError(
                f"Cannot migrate the database's schema: {error} (a revision unknown here "
                "comes from a newer persona-agent)"
            ) from None
        finally:
            if postgres:
                try:
                    await conn.rollback()  # what a failed migration left
                    await conn.execute(text(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})"))
                    await conn.commit()
                except (OSError, SQLAlchemyError):
                    await conn.invalidate()  # its session ends, and the lock with it


async def db_revision(engine: AsyncEngine) -> tuple[str | None, str]:
    """The database's schema revision (``None``: none yet, empty or made before
    migrations) and the newest revision this version of persona-agent has."""
    from persona_agent.migrations import revisions

    async with engine.connect() as conn:
        current = await conn.run_sync(revisions.current_revision)
    return current, revisions.head_revision()


async def prepare_db(database: GroupCommitWriter | AsyncEngine, *, auto_upgrade: bool) -> None:
    """At start-up: migrate the database to the newest schema (``auto_upgrade``), or check
    that it is there already (``PERSONA_AGENT_DB_AUTO_UPGRADE=false``). Given the hub's
    writer, a database at the newest schema is checked through it alone (no SQLAlchemy on
    a SQLite file); the engine is made only to migrate.

    Raises:
        ConfigError: not ``auto_upgrade``, and the database is not at the newest revision
            (the message names ``persona-agent db upgrade``); or as :func:`upgrade_db`.
    """
    if await _at_revision(database, SCHEMA_REVISION):
        return  # the usual start: nothing to do, and Alembic not even imported (~0.2 s)
    engine = database.engine if isinstance(database, GroupCommitWriter) else database
    if auto_upgrade:
        await upgrade_db(engine)
        return
    current, head = await db_revision(engine)
    if current != head:
        raise ConfigError(
            f"The database's schema is at revision {current or 'none'}, this persona-agent "
            f"needs {head}: run `persona-agent db upgrade` first (or set "
            "PERSONA_AGENT_DB_AUTO_UPGRADE=true to migrate at start-up)"
        )
