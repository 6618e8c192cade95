"""Memory: remembered turns per persona and caller, with their vectors.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    if "pa_memories" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_memories",
        sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
        sa.Column("persona_id", sa.String(63), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("conversation", sa.String(300), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index(
        "ix_pa_memories_scope",
        "pa_memories",
        ["persona_id", "owner", "conversation", "seq"],
    )


def downgrade() -> None:
    op.drop_index("ix_pa_memories_scope", table_name="pa_memories")
    op.drop_table("pa_memories")
