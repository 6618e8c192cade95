"""Conversation keys: the key of a caller's conversation with a persona, and how a stored
row's key names the caller it is of.

A key is ``{persona_id}:{conversation}`` (:func:`history_key`): an identified caller's
conversation is ``@{quoted caller}:{context id}``, an anonymous one its context id (``@:``
before one that starts with ``@``: :func:`conversation_key`). A persona id is a slug (no
``:``), and a quoted caller has no ``:``: the *owner part* of a key, ``@{quoted caller}:``
or ``""`` (every anonymous conversation), is read from it exactly, in Python
(:func:`owner_part`) and in SQL (:func:`owner_expression`, :func:`owned_by`), on SQLite
and on PostgreSQL alike.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from sqlalchemy import (
    ColumnElement,
    Integer,
    String,
    bindparam,
    case,
    func,
    literal_column,
    or_,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["conversation_key", "history_key", "owned_by", "owner_expression", "owner_part"]


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


class _Position(FunctionElement[int]):
    """Where ``needle`` first is in ``text`` (from 1; 0: nowhere): ``instr`` on SQLite,
    ``strpos`` on PostgreSQL."""

    inherit_cache = True
    name = "position"


@compiles(_Position)
def _instr(element: _Position, compiler: Any, **kw: Any) -> str:
    return f"instr({compiler.process(element.clauses, **kw)})"


@compiles(_Position, "postgresql")
def _strpos(element: _Position, compiler: Any, **kw: Any) -> str:
    return f"strpos({compiler.process(element.clauses, **kw)})"


_COLON: ColumnElement[str] = literal_column("':'", String())
_AT: ColumnElement[str] = literal_column("'@'", String())
_AT_COLON: ColumnElement[str] = literal_column("'@:'", String())
_ONE: ColumnElement[int] = literal_column("1", Integer())
_TWO: ColumnElement[int] = literal_column("2", Integer())
"""Constants written into the SQL (no parameters: a write's rows name every parameter)."""


def _rest(column: ColumnElement[str]) -> ColumnElement[str]:
    """The key after the persona's id and its ``:``."""
    return func.substr(column, _Position(column, _COLON) + _ONE)


def _anonymous(rest: ColumnElement[str]) -> ColumnElement[bool]:
    return or_(func.substr(rest, _ONE, _ONE) != _AT, func.substr(rest, _ONE, _TWO) == _AT_COLON)


def owner_expression(column: ColumnElement[str]) -> ColumnElement[str]:
    """:func:`owner_part` in SQL, of the key in ``column`` (to group rows by caller)."""
    rest = _rest(column)
    owner = func.substr(rest, _ONE, _Position(func.substr(rest, _TWO), _COLON) + _ONE)
    return case((_anonymous(rest), literal_column("''")), else_=owner)


def owned_by(column: ColumnElement[str], owner: str) -> ColumnElement[bool]:
    """Whether the key in ``column`` is of ``owner`` (an owner part, :func:`owner_part`):
    a condition for a query (its values are bound in it)."""
    rest = _rest(column)
    if owner:
        return func.substr(rest, _ONE, bindparam("owner_length", len(owner))) == bindparam(
            "owner", owner
        )
    return _anonymous(rest)
