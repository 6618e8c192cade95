"""The user personas' table (``pa_user_personas``): an identified caller's saved user
persona and each conversation's, made on the hub's :data:`persona_agent.db.metadata` (read
and written by :mod:`persona_agent.conversations.user_persona`)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, String, Table, Text

from persona_agent.db import metadata

__all__ = ["user_personas_table"]

user_personas_table = Table(
    "pa_user_personas",
    metadata,
    Column("scope", String(400), primary_key=True),  # caller:{owner} or conversation:{key}
    Column("name", String(64), nullable=False),
    Column("description", Text, nullable=False),
    Column("at_ms", BigInteger, nullable=False),  # when it was set, ms since the epoch
)
"""One row per scope: an identified caller's saved user persona, or one conversation's."""
