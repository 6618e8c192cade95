"""The database's errors as the hub's stores see them, whichever driver raised them: a
:class:`~persona_agent.db.sql.Sql` statement fails with one of these on SQLite
(``sqlite3``) and on PostgreSQL (SQLAlchemy on asyncpg) alike, the driver's error as its
``__cause__``."""

from __future__ import annotations

__all__ = ["DatabaseError", "IntegrityError", "OperationalError", "translated"]


class DatabaseError(Exception):
    """A statement failed in the database."""


class IntegrityError(DatabaseError):
    """A constraint refused a write (a duplicate key, a missing row it refers to)."""


class OperationalError(DatabaseError):
    """The database could not run the statement (locked, gone, no such table)."""


def translated(error: BaseException) -> DatabaseError:
    """``error`` (``sqlite3``'s, or SQLAlchemy's ``DBAPIError``) as the hub's own, by its
    class's name; anything else as :class:`DatabaseError` (raise it ``from error``)."""
    names = {kind.__name__ for kind in type(error).__mro__}
    kind: type[DatabaseError] = DatabaseError
    if "IntegrityError" in names:
        kind = IntegrityError
    elif "OperationalError" in names:
        kind = OperationalError
    return kind(str(error))
