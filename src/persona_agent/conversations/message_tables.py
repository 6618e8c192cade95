"""The conversations' tables: each conversation's selected branch (``pa_messages``, a
message's id being its ``seq``) and the other alternatives of its answers (``pa_swipes``).

Rows are keyed by the conversation's key (:func:`~persona_agent.conversations.keys.history_key`).
Written by the history (each completed turn) and by the branches (every steering write);
read by the stores of this package, the running summary and the retention sweep.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, String, Table, Text

from persona_agent.db import metadata

__all__ = ["messages_table", "swipes_table"]

messages_table = Table(
    "pa_messages",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),  # a message's id
    Column("conversation", String(300), nullable=False),  # "{persona_id}:{context_id}"
    Column("message", Text, nullable=False),  # one chat message, JSON in the OpenAI format
    Column("at_ms", BigInteger, nullable=True),  # when it was stored (none: before 0010)
    Index("ix_pa_messages_conversation", "conversation", "seq"),
)
"""Each conversation's selected branch, in order."""

swipes_table = Table(
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
"""The alternatives of answers that have more than one."""
