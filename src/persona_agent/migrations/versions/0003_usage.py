"""Usage: each completed answer's tokens and cost.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER only


def upgrade() -> None:
    if "pa_usage" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_usage",
        sa.Column("seq", _Seq, primary_key=True, autoincrement=True),
        sa.Column("persona_id", sa.String(63), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
    )
    op.create_index("ix_pa_usage_persona_at", "pa_usage", ["persona_id", "at_ms"])


def downgrade() -> None:
    op.drop_index("ix_pa_usage_persona_at", table_name="pa_usage")
    op.drop_table("pa_usage")
