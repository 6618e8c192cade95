"""The usage table: each completed answer's tokens and cost (``pa_usage``), made on the
hub's :data:`persona_agent.db.metadata` (written and summed by
:mod:`persona_agent.chat.usage_log`, which names it in its SQL text)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, String, Table

from persona_agent.db import SEQ, metadata

__all__ = ["usage_table"]

usage_table = Table(
    "pa_usage",
    metadata,
    Column("seq", SEQ, primary_key=True, autoincrement=True),
    Column("persona_id", String(63), nullable=False),
    Column("model", String(200), nullable=False),
    Column("at_ms", BigInteger, nullable=False),  # when the turn completed, ms since the epoch
    Column("prompt_tokens", BigInteger, nullable=False),
    Column("completion_tokens", BigInteger, nullable=False),
    Column("cached_prompt_tokens", BigInteger, nullable=False),
    Column("cost_usd", Float, nullable=True),  # none: the model has no price
    Index("ix_pa_usage_persona_at", "persona_id", "at_ms"),
)
"""Each completed answer's tokens and cost."""
