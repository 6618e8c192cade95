"""See what reached the model (issue 50): each answer's prompt by section (``pa_prompts``),
keyed by the answer message, deleted with its conversation.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if "pa_prompts" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_prompts",
        sa.Column("conversation", sa.String(400), primary_key=True),
        sa.Column("message_id", sa.BigInteger(), primary_key=True),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pa_prompts")
