"""Statements as SQL text: what the stores of a default hub run, with no SQLAlchemy loaded.

A :class:`Sql` is SQL text with ``:name`` parameters that SQLite (the standard ``sqlite3``
module, named style) and PostgreSQL (SQLAlchemy's ``text()`` on asyncpg, loaded only there)
both run as written, or with PostgreSQL's own text beside it where the two differ. Values
go in and come out as the drivers give them (``int``, ``str``, ``bytes``, ``float``,
``None``): no type processing, as the SQLite file has always been read and written
(:mod:`persona_agent.db.sqlite_file`). The tables themselves stay defined in SQLAlchemy,
for Alembic and the tests that compare the revisions with them
(:mod:`persona_agent.migrations.tables`); a store's statements name them as text.

Writing one: the SQL SQLAlchemy compiled for the statement it replaces is the model (the
same columns, the same ``ESCAPE '\\'`` after a LIKE of :func:`like_escaped` text), checked
on both databases by the store's tests.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Sql", "in_list", "like_escaped"]


class Sql:
    """One statement: SQL text with ``:name`` parameters, the same on both databases unless
    ``postgresql`` gives PostgreSQL's own.

    ``table``: the table it writes (or reads), for the write's span and for the group
    commit, which keeps every table's writes in order. Built once per store where its text
    is fixed; a text built per call (an ``IN`` list, a filter) is fine too: both drivers
    cache prepared statements by text.
    """

    __slots__ = ("operation", "postgresql", "table", "text")

    def __init__(self, text: str, *, table: str = "", postgresql: str | None = None) -> None:
        self.text = text
        self.postgresql = postgresql
        self.table = table
        first = text.lstrip().split(None, 1)
        self.operation = first[0].upper() if first else ""
        """The statement's first word: ``INSERT``, ``UPDATE``, ``DELETE``, ``SELECT``..."""

    def for_dialect(self, dialect: str) -> str:
        """The text to run on ``dialect`` (``sqlite``, ``postgresql``)."""
        if dialect == "postgresql" and self.postgresql is not None:
            return self.postgresql
        return self.text

    def __repr__(self) -> str:
        return f"Sql({self.text!r})"


def in_list(name: str, values: Iterable[Any]) -> tuple[str, dict[str, Any]]:
    """An ``IN`` list of parameters: ``("(:name_0, :name_1)", {"name_0": a, "name_1": b})``.

    No values give ``(NULL)``, which matches nothing (``x IN (NULL)`` is never true).
    """
    parameters = {f"{name}_{index}": value for index, value in enumerate(values)}
    if not parameters:
        return "(NULL)", {}
    return "(" + ", ".join(f":{key}" for key in parameters) + ")", parameters


def like_escaped(text: str) -> str:
    """``text`` for a LIKE pattern with ``\\`` as the escape (``ESCAPE '\\'``): its
    wildcards taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
