"""Memory's table (``pa_memories``): what callers told personas, each message with its vector,
by persona, caller and conversation.

Written and searched by :mod:`.remembered`, managed by its caller through :mod:`.records`,
shared between a persona's callers by :mod:`.shared`, cleared with its persona by
:mod:`.scope`; aged out by the retention sweep. Nothing here imports numpy or a model.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, LargeBinary, String, Table, Text

from persona_agent.db import SEQ, metadata

__all__ = ["memories_table"]

memories_table = Table(
    "pa_memories",
    metadata,
    Column("seq", SEQ, primary_key=True, autoincrement=True),
    Column("persona_id", String(63), nullable=False),
    Column("owner", String(200), nullable=False),  # the identified caller; "" anonymous
    Column("conversation", String(300), nullable=False),  # the conversation's key
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
)
