"""Conversation keys: the key of a caller's conversation with a persona, and how a stored
row's key names the caller it is of.

A key is ``{persona_id}:{conversation}`` (:func:`history_key`): an identified caller's
conversation is ``@{quoted caller}:{context id}``, an anonymous one its context id (``@:``
before one that starts with ``@``: :func:`conversation_key`). A persona id is a slug (no
``:``), and a quoted caller has no ``:``: the *owner part* of a key, ``@{quoted caller}:``
or ``""`` (every anonymous conversation), is read from it exactly, in Python
(:func:`owner_part`) and in SQL (:func:`owner_sql`, :func:`owned_by_sql`), on SQLite and on
PostgreSQL alike.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

__all__ = [
    "conversation_key",
    "history_key",
    "owned_by_sql",
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
