"""Conversation keys: the key of a caller's conversation with a persona, and how a stored
row's key names the caller it is of.

A key is ``{persona_id}:{conversation}`` (:func:`history_key`): an identified caller's
conversation is ``@{quoted caller}:{context id}``, an anonymous one its context id (``@:``
before one that starts with ``@``: :func:`conversation_key`). A persona id is a slug (no
``:``), and a quoted caller has no ``:``: the *owner part* of a key, ``@{quoted caller}:``
or ``""`` (every anonymous conversation), is read from it exactly, in Python
(:func:`owner_part`) and in SQL (:func:`owner_sql`, :func:`owned_by_sql`; in SQLAlchemy
Core :func:`owner_expression`, :func:`owned_by`), on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement

__all__ = [
    "conversation_key",
    "history_key",
    "owned_by",
    "owned_by_sql",
    "owner_expression",
    "owner_part",
    "owner_sql",
]


def conversation_key(owner: str, context_id: str) -> str:
    """The conversation of a caller's ``contextId``: the context id alone for an anonymous
    caller (anyone who knows it continues it), else the caller's too, so that another
    caller reusing the id starts a conversation of its own. The owner is quoted (no ``:``
    in it), and an anonymous context id that starts with ``@`` gets ``@:`` before it, so
    that no owner and context id can spell another caller's key."""
    if not owner:
        return f"@:{context_id}" if context_id.startswith("@") else context_id
    return f"@{quote(owner, safe='')}:{context_id}"


def history_key(persona_id: str, owner: str, context_id: str) -> str:
    """The key of ``owner``'s conversation ``context_id`` with the persona (in
    ``pa_messages`` and the tables beside it): the persona's id, then
    :func:`conversation_key`."""
    return f"{persona_id}:{conversation_key(owner, context_id)}"


def owner_part(key: str) -> str:
    """The owner part of a conversation's key: ``@{quoted caller}:``, or ``""`` for an
    anonymous conversation."""
    rest = key.partition(":")[2]
    if not rest.startswith("@") or rest.startswith("@:"):
        return ""
    quoted, colon, _ = rest[1:].partition(":")
    return f"@{quoted}{colon}"


def _position(dialect: str) -> str:
    """Where a needle first is in a text (from 1; 0: nowhere): ``instr`` on SQLite,
    ``strpos`` on PostgreSQL."""
    return "strpos" if dialect == "postgresql" else "instr"


def _rest_sql(column: str, dialect: str) -> str:
    """The key after the persona's id and its ``:``."""
    return f"substr({column}, {_position(dialect)}({column}, ':') + 1)"


def _anonymous_sql(rest: str) -> str:
    return f"(substr({rest}, 1, 1) != '@' OR substr({rest}, 1, 2) = '@:')"


def owner_sql(column: str, dialect: str) -> str:
    """:func:`owner_part` in SQL text (for a :class:`~persona_agent.db.Sql` on
    ``dialect``, ``sqlite`` or ``postgresql``), of the key in ``column`` (a column's name as
    the statement names it, ``pa_messages.conversation``): to group rows by caller. No
    parameters."""
    rest = _rest_sql(column, dialect)
    owner = f"substr({rest}, 1, {_position(dialect)}(substr({rest}, 2), ':') + 1)"
    return f"CASE WHEN {_anonymous_sql(rest)} THEN '' ELSE {owner} END"


def owned_by_sql(column: str, owner: str, dialect: str) -> tuple[str, dict[str, Any]]:
    """Whether the key in ``column`` is of ``owner`` (an owner part, :func:`owner_part`):
    a condition in SQL text for ``dialect`` (in parentheses), and its parameters
    (``owner_length``, ``owner``; none for the anonymous owner ``""``)."""
    rest = _rest_sql(column, dialect)
    if owner:
        condition = f"(substr({rest}, 1, CAST(:owner_length AS INTEGER)) = :owner)"
        return condition, {"owner_length": len(owner), "owner": owner}
    return _anonymous_sql(rest), {}


# The same in SQLAlchemy Core, for the statements still written in it (SQLAlchemy imported
# on the first call).


@cache
def _core_position() -> Any:
    """SQLAlchemy's function for :func:`_position` (defined, with its compilers, once)."""
    from sqlalchemy.ext.compiler import compiles
    from sqlalchemy.sql.functions import FunctionElement

    class _Position(FunctionElement[int]):
        inherit_cache = True
        name = "position"

    @compiles(_Position)
    def _instr(element: _Position, compiler: Any, **kw: Any) -> str:
        return f"instr({compiler.process(element.clauses, **kw)})"

    @compiles(_Position, "postgresql")
    def _strpos(element: _Position, compiler: Any, **kw: Any) -> str:
        return f"strpos({compiler.process(element.clauses, **kw)})"

    return _Position


def _core_rest(column: ColumnElement[str]) -> ColumnElement[str]:
    from sqlalchemy import Integer, String, func, literal_column

    colon = literal_column("':'", String())
    return func.substr(column, _core_position()(column, colon) + literal_column("1", Integer()))


def _core_anonymous(rest: ColumnElement[str]) -> ColumnElement[bool]:
    from sqlalchemy import Integer, String, func, literal_column, or_

    one = literal_column("1", Integer())
    two = literal_column("2", Integer())
    return or_(
        func.substr(rest, one, one) != literal_column("'@'", String()),
        func.substr(rest, one, two) == literal_column("'@:'", String()),
    )


def owner_expression(column: ColumnElement[str]) -> ColumnElement[str]:
    """:func:`owner_part` in SQLAlchemy Core, of the key in ``column`` (to group rows by
    caller); constants written into the SQL (no parameters: a write's rows name every
    parameter)."""
    from sqlalchemy import Integer, String, case, func, literal_column

    one = literal_column("1", Integer())
    rest = _core_rest(column)
    colon = literal_column("':'", String())
    owner = func.substr(
        rest, one, _core_position()(func.substr(rest, literal_column("2", Integer())), colon) + one
    )
    return case((_core_anonymous(rest), literal_column("''")), else_=owner)


def owned_by(column: ColumnElement[str], owner: str) -> ColumnElement[bool]:
    """:func:`owned_by_sql` in SQLAlchemy Core: a condition for a query (its values are
    bound in it)."""
    from sqlalchemy import Integer, bindparam, func, literal_column

    rest = _core_rest(column)
    if owner:
        one = literal_column("1", Integer())
        return func.substr(rest, one, bindparam("owner_length", len(owner))) == bindparam(
            "owner", owner
        )
    return _core_anonymous(rest)
