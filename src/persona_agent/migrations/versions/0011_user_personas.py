"""Conversations: who the user is (issue 37): each identified caller's saved user persona
and each conversation's (``pa_user_personas``, one row per scope).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if "pa_user_personas" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_user_personas",
        sa.Column("scope", sa.String(400), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pa_user_personas")
