"""The hub's one schema: the ``MetaData`` every table is made on, wherever it is defined,
and what tables and statements share.

Each table is defined beside the store that owns it (the conversations' in
:mod:`persona_agent.conversations`, memory's in :mod:`persona_agent.memory`...), on
:data:`metadata`; :mod:`persona_agent.migrations.tables` imports them all, for Alembic and
for the tests that compare the revisions with the tables.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, MetaData, text

from persona_agent.db.sql import like_escaped

__all__ = ["NOTIFY", "SEQ", "like_escaped", "metadata"]

metadata = MetaData()

SEQ = BigInteger().with_variant(Integer, "sqlite")
"""The type of an autoincremented key (SQLite autoincrements INTEGER only)."""

NOTIFY = text("SELECT pg_notify(:channel, :payload)")
"""PostgreSQL: notify ``channel`` with ``payload`` (at most 8000 bytes) when the transaction
commits (replicas listen: :mod:`persona_agent.cluster.notify`)."""
