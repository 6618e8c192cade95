"""The hub's database as a URL and what reaching it takes: a SQLite file through the
standard ``sqlite3`` module alone, or SQLAlchemy's async engine, made when first needed.

A default hub (a SQLite file, its schema at the newest revision) never makes the engine,
so SQLAlchemy is not even imported (docs/performance.md, issue 52): its stores run
:class:`~persona_agent.db.sql.Sql` statements on the file's own connections
(:class:`~persona_agent.db.sqlite_file.SqliteFile`). The engine comes at once for another
database (PostgreSQL), and on the first call that needs it for a file (a migration, a
statement still written in SQLAlchemy Core, the ``db`` commands).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["Database", "sqlite_file_path"]

_SQLITE_PREFIX = "sqlite+aiosqlite:///"


def sqlite_file_path(url: str) -> str | None:
    """The file of a plain SQLite URL (``sqlite+aiosqlite:///path``, no query), else
    ``None`` (another database, memory, or a form only SQLAlchemy reads)."""
    if not url.startswith(_SQLITE_PREFIX):
        return None
    path = url[len(_SQLITE_PREFIX) :]
    if not path or path == ":memory:" or any(mark in path for mark in "?%#"):
        return None
    return path


class Database:
    """The database at ``url``; for a SQLite file, its parent directory is created.

    ``pool_size`` and ``max_overflow``: the connection pool of another database.

    Raises:
        ConfigError: ``url`` is not a database URL, or names a driver that is not
            installed or not an asyncio one (checked at once, except for a plain SQLite
            file, which needs no driver but ``sqlite3``).
    """

    def __init__(self, url: str, *, pool_size: int = 10, max_overflow: int = 20) -> None:
        self.url = url
        self.sqlite_path = sqlite_file_path(url)
        self._pool = (pool_size, max_overflow)
        self._engine: AsyncEngine | None = None
        if self.sqlite_path is not None:
            Path(self.sqlite_path).parent.mkdir(parents=True, exist_ok=True)
            self.dialect = "sqlite"
        else:
            self.dialect = self.engine.dialect.name

    @classmethod
    def of(cls, engine: AsyncEngine) -> Database:
        """The database an engine already reaches (tests, the command line)."""
        database = cls.__new__(cls)
        database.url = engine.url.render_as_string(hide_password=False)
        database._pool = (0, 0)
        database._engine = engine
        name = engine.url.database
        local = engine.dialect.name == "sqlite" and name not in (None, "", ":memory:")
        database.sqlite_path = str(name) if local else None
        database.dialect = engine.dialect.name
        return database

    @property
    def engine(self) -> AsyncEngine:
        """SQLAlchemy's async engine on the database, made (and SQLAlchemy imported) on the
        first use."""
        if self._engine is None:
            from persona_agent.db.async_engine import create_engine

            pool_size, max_overflow = self._pool
            self._engine = create_engine(self.url, pool_size=pool_size, max_overflow=max_overflow)
        return self._engine

    @property
    def has_engine(self) -> bool:
        """Whether the engine was made (SQLAlchemy loaded)."""
        return self._engine is not None

    async def dispose(self) -> None:
        """Close the engine's connections, if it was made."""
        if self._engine is not None:
            await self._engine.dispose()
