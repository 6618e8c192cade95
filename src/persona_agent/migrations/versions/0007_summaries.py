"""Memory: each conversation's running summary of what left its window.

Revision ID: 0007
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if "pa_summaries" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_summaries",
        sa.Column("conversation", sa.String(300), primary_key=True),
        sa.Column("persona_id", sa.String(63), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("upto_seq", sa.BigInteger(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_pa_summaries_persona", "pa_summaries", ["persona_id"])


def downgrade() -> None:
    op.drop_index("ix_pa_summaries_persona", table_name="pa_summaries")
    op.drop_table("pa_summaries")
