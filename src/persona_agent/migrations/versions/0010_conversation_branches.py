"""Conversations people steer (issue 37): when each message was stored (``pa_messages.at_ms``),
and the alternatives of answers that were regenerated (``pa_swipes``).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None

_INDEX = "ix_pa_swipes_conversation"


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if not any(column["name"] == "at_ms" for column in inspector.get_columns("pa_messages")):
        op.add_column("pa_messages", sa.Column("at_ms", sa.BigInteger(), nullable=True))
    if "pa_swipes" in inspector.get_table_names():  # made by create_all of today
        return
    op.create_table(
        "pa_swipes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("conversation", sa.String(300), nullable=False),
        sa.Column("anchor", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("messages", sa.Text(), nullable=True),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index(_INDEX, "pa_swipes", ["conversation", "anchor", "position"])


def downgrade() -> None:
    op.drop_index(_INDEX, table_name="pa_swipes")
    op.drop_table("pa_swipes")
    with op.batch_alter_table("pa_messages") as batch:
        batch.drop_column("at_ms")
