"""Alembic's side of the migrations: the revisions in ``versions/`` run on a connection.

:func:`persona_agent.migrations.upgrade_db` runs them on the hub's async engine: the
engine's connection is handed to Alembic, configured in code (there is no alembic.ini), in
``config.attributes["connection"]``, and ``env.py`` runs the revisions on it. Each
revision is written out in full (``op.create_table`` ...), never from
:data:`persona_agent.db.metadata`, so that changing the tables later does not change old
revisions; ``tests/migrations/test_migrations.py`` fails when ``metadata`` and the revisions differ.

A new revision starts from ``script.py.mako``::

    from alembic import command
    from persona_agent.migrations.revisions import alembic_config

    command.revision(alembic_config(), "what it changes", rev_id="0005")

The push-notification configs' table belongs to the SDK, which creates it itself: no
revision touches it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

__all__ = [
    "SCRIPT_LOCATION",
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "one_at_a_time",
    "upgrade",
]

SCRIPT_LOCATION = "persona_agent:migrations"

_running = threading.Lock()

logger = logging.getLogger(__name__)


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, built in code; ``env.py`` migrates ``connection``."""
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision of ``versions/``."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("persona_agent/migrations/versions holds no revision")
    return head


def current_revision(connection: Connection) -> str | None:
    """The database's revision; ``None`` without ``alembic_version`` (empty, or made before
    migrations by ``create_all``)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate ``connection``'s database up to ``revision`` (for ``AsyncConnection.run_sync``).

    Commits nothing itself when ``connection`` is already in a transaction: the caller
    commits. Run inside :func:`one_at_a_time`.
    """
    before = current_revision(connection)
    command.upgrade(alembic_config(connection), revision)
    after = current_revision(connection)
    if after != before:  # one line for Alembic's several (quiet below WARNING: observe.logs)
        logger.info("Database schema migrated from %s to %s", before or "nothing", after)


def downgrade(connection: Connection, revision: str) -> None:
    """Migrate ``connection``'s database down to ``revision``, as :func:`upgrade`."""
    command.downgrade(alembic_config(connection), revision)


@asynccontextmanager
async def one_at_a_time() -> AsyncIterator[None]:
    """One Alembic run at a time in this process, whatever its event loop or thread.

    Alembic keeps the running migration in module globals (``alembic.context``,
    ``alembic.op``), and a migration on an async engine gives way to other tasks at every
    statement: two at once, even on two databases, would run on each other's globals.
    """
    # A thread's lock, not the loop's: hubs in other threads (and loops) share the globals.
    # It cannot be awaited, and acquiring it in a worker thread would leave it taken when the
    # waiter is canceled; another migration is rare and short (start-up), so it is polled.
    while not _running.acquire(blocking=False):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        _running.release()
