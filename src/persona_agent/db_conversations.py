"""The conversations' tables: each conversation's selected branch (``pa_messages``) and the
alternatives of its answers (``pa_swipes``, :mod:`persona_agent.conversations`), made on the
hub's :data:`persona_agent.db.metadata` by :mod:`persona_agent.db` (a module of their own:
that one keeps to the house's size), and how a row's key names the caller it is of.

A key is ``{persona_id}:{conversation}`` (``persona_agent.a2a.lifecycle.history_key``): an
identified caller's conversation is ``@{quoted caller}:{context id}``, an anonymous one
its context id (``@:`` before one that starts with ``@``). A persona id is a slug (no
``:``), and a quoted caller has no ``:``: the *owner part* of a key, ``@{quoted caller}:``
or ``""`` (every anonymous conversation), is read from it exactly, in Python
(:func:`owner_part`) and in SQL (:func:`owner_expression`, :func:`owned_by`), on SQLite
and on PostgreSQL alike.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    case,
    func,
    literal_column,
    or_,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["conversation_tables", "owned_by", "owner_expression", "owner_part"]


def conversation_tables(metadata: MetaData) -> tuple[Table, Table]:
    """``pa_messages`` and ``pa_swipes`` on ``metadata``."""
    messages = Table(
        "pa_messages",
        metadata,
        Column("seq", Integer, primary_key=True, autoincrement=True),  # a message's id
        Column("conversation", String(300), nullable=False),  # "{persona_id}:{context_id}"
        Column("message", Text, nullable=False),  # one chat message, JSON in the OpenAI format
        Column("at_ms", BigInteger, nullable=True),  # when it was stored (none: before 0010)
        Index("ix_pa_messages_conversation", "conversation", "seq"),
    )
    swipes = Table(
        "pa_swipes",
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("conversation", String(300), nullable=False),
        Column("anchor", Integer, nullable=False),  # the user message's seq (0: the greeting)
        Column("position", Integer, nullable=False),
        Column("messages", Text, nullable=True),  # JSON chat messages; none: the selected one
        Column("at_ms", BigInteger, nullable=False),
        Index("ix_pa_swipes_conversation", "conversation", "anchor", "position"),
    )
    return messages, swipes


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
