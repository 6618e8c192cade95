"""The user personas' table: who each caller, or each conversation's user, says they are
(:mod:`persona_agent.conversations.user_persona`), made on the hub's
:data:`persona_agent.db.metadata` by :mod:`persona_agent.db` (a module of its own: that one
keeps to the house's size)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, MetaData, String, Table, Text

__all__ = ["user_personas"]


def user_personas(metadata: MetaData) -> Table:
    """``pa_user_personas`` on ``metadata``: one row per scope, ``caller:{owner}`` (an
    identified caller's saved user persona) or ``conversation:{key}`` (one conversation's,
    by the history's key)."""
    return Table(
        "pa_user_personas",
        metadata,
        Column("scope", String(400), primary_key=True),
        Column("name", String(64), nullable=False),
        Column("description", Text, nullable=False),
        Column("at_ms", BigInteger, nullable=False),  # when it was set, ms since the epoch
    )
