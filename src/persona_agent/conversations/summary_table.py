"""The running summaries' table (``pa_summaries``): one row per conversation, made on the
hub's :data:`persona_agent.db.metadata` (read and written by
:mod:`persona_agent.conversations.summary_store`)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, String, Table, Text

from persona_agent.db import metadata

__all__ = ["summaries_table"]

summaries_table = Table(
    "pa_summaries",
    metadata,
    Column("conversation", String(300), primary_key=True),  # the key, as in pa_messages
    Column("persona_id", String(63), nullable=False),
    Column("owner", String(200), nullable=False),  # the identified caller; "" anonymous
    Column("text", Text, nullable=False),
    Column("upto_seq", BigInteger, nullable=False),  # the last pa_messages.seq it covers
    Column("at_ms", BigInteger, nullable=False),  # ms since the epoch
    Index("ix_pa_summaries_persona", "persona_id"),
)
"""Each conversation's running summary of the messages that left its window."""
