"""Push notifications: who created each config, for the cap per caller.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if "pa_push_callers" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_push_callers",
        sa.Column("task_id", sa.String(200), primary_key=True),
        sa.Column("config_id", sa.String(255), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("caller", sa.String(300), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_pa_push_callers_caller", "pa_push_callers", ["caller"])


def downgrade() -> None:
    op.drop_index("ix_pa_push_callers_caller", table_name="pa_push_callers")
    op.drop_table("pa_push_callers")
