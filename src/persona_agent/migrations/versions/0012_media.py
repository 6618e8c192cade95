"""Images in (issue 38): the images sent to each conversation, stored once by content hash
(``pa_media``), deleted with the conversation.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if "pa_media" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_media",
        sa.Column("conversation", sa.String(400), primary_key=True),
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("media_type", sa.String(40), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pa_media")
