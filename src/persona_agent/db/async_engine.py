"""The database's engine: a URL checked and turned into a SQLAlchemy async engine, with
SQLite's pragmas on each of its connections.

SQLite (a file in the data directory) is the embedded default; PostgreSQL
(``postgresql+asyncpg://...``) serves replicas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, InvalidRequestError, NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from persona_agent.errors import ConfigError

__all__ = ["create_engine"]


def create_engine(url: str, *, pool_size: int = 10, max_overflow: int = 20) -> AsyncEngine:
    """An engine for ``url``; for SQLite, the parent directory is created and WAL is on.
    ``pool_size`` and ``max_overflow``: the connection pool of another database.

    Raises:
        ConfigError: ``url`` is not a database URL, or names a driver that is not
            installed or not an asyncio one.
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(
            "The database URL is not a database URL: give one such as "
            "sqlite+aiosqlite:///path/to/hub.db or postgresql+asyncpg://user@host/db"
        ) from None
    is_sqlite = parsed.get_backend_name() == "sqlite"
    if is_sqlite and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    # SQLite has one writer at a time; several pooled connections contend for its lock
    # (and a read that upgrades to a write fails at once with "database is locked").
    # One connection serializes every statement in order instead.
    where = f"{parsed.drivername}://"  # never the rest: it may hold a password
    try:
        engine = (
            create_async_engine(url, pool_size=1, max_overflow=0)
            if is_sqlite
            else create_async_engine(url, pool_size=pool_size, max_overflow=max_overflow)
        )
    except ModuleNotFoundError as error:
        extra = (
            # Not `pip install persona-agent`: that name on PyPI is another project's.
            ": for PostgreSQL, use postgresql+asyncpg:// and install the driver with "
            "`uv sync --extra postgres`"
            if parsed.get_backend_name() == "postgresql"
            else ""
        )
        raise ConfigError(
            f"The database URL ({where}) needs the Python package '{error.name}'{extra}"
        ) from None
    except (NoSuchModuleError, InvalidRequestError):
        raise ConfigError(
            f"The database URL ({where}) must name an asyncio driver: "
            "sqlite+aiosqlite:// or postgresql+asyncpg://"
        ) from None
    if is_sqlite:

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.close()

    return engine
