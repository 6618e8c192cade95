"""The conversations' tables: each conversation's selected branch (``pa_messages``) and the
alternatives of its answers (``pa_swipes``, :mod:`persona_agent.conversations`), made on the
hub's :data:`persona_agent.db.metadata` by :mod:`persona_agent.db` (a module of their own:
that one keeps to the house's size)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text

__all__ = ["conversation_tables"]


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
