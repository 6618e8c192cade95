"""The prompts' table: what reached the model for each answer (issue 50), one row per answer
message, made on the hub's :data:`persona_agent.db.metadata` (read and written by
:mod:`persona_agent.conversations.prompt_store`)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, String, Table, Text

from persona_agent.db import metadata

__all__ = ["prompts_table"]

prompts_table = Table(
    "pa_prompts",
    metadata,
    Column("conversation", String(400), primary_key=True),  # the history's key
    Column("message_id", BigInteger, primary_key=True),  # the answer's pa_messages.seq
    Column("record", Text, nullable=False),  # JSON: chat/prompt_record.py
    Column("created_ms", BigInteger, nullable=False),  # ms since the epoch
)
"""Each answer's prompt by section (:mod:`persona_agent.chat.prompt_record`), keyed by the
answer message; the last few of each conversation are kept, and they go with it."""
