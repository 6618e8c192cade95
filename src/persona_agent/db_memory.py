"""Memory's tables: what callers told personas, with its vectors, and the running summaries
of conversations (:mod:`persona_agent.memory`), made on the hub's
:data:`persona_agent.db.metadata` by :mod:`persona_agent.db` (a module of their own: that
one keeps to the house's size)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, LargeBinary, MetaData, String, Table, Text
from sqlalchemy.types import TypeEngine

__all__ = ["memory_tables"]


def memory_tables(metadata: MetaData, seq: TypeEngine[int]) -> tuple[Table, Table]:
    """``pa_memories`` and ``pa_summaries`` on ``metadata``; ``seq``: the type of an
    autoincremented key."""
    memories = Table(
        "pa_memories",
        metadata,
        Column("seq", seq, primary_key=True, autoincrement=True),
        Column("persona_id", String(63), nullable=False),
        Column("owner", String(200), nullable=False),  # the identified caller; "" anonymous
        Column("conversation", String(300), nullable=False),  # the engine's conversation key
        Column("role", String(20), nullable=False),  # user or assistant
        Column("text", Text, nullable=False),
        Column("model", String(100), nullable=False),  # the embedder that made the vector
        Column("vector", LargeBinary, nullable=False),  # float32, little-endian, unit length
        Column("at_ms", BigInteger, nullable=False),  # ms since the epoch
        Index("ix_pa_memories_scope", "persona_id", "owner", "conversation", "seq"),
        # A search's first query (the scope's count and highest seq) reads this index alone.
        Index("ix_pa_memories_model_scope", "persona_id", "owner", "model", "conversation", "seq"),
        # Forgetting a caller deletes its records with every persona (migration 0009).
        Index("ix_pa_memories_owner", "owner"),
    )  # what callers told personas, with its vectors (persona_agent.memory.remembered)
    summaries = Table(
        "pa_summaries",
        metadata,
        # The engine's conversation key, as in pa_messages.
        Column("conversation", String(300), primary_key=True),
        Column("persona_id", String(63), nullable=False),
        Column("owner", String(200), nullable=False),  # the identified caller; "" anonymous
        Column("text", Text, nullable=False),
        Column("upto_seq", BigInteger, nullable=False),  # the last pa_messages.seq it covers
        Column("at_ms", BigInteger, nullable=False),  # ms since the epoch
        Index("ix_pa_summaries_persona", "persona_id"),
    )  # each conversation's running summary of what left its window (memory.summary)
    return memories, summaries
