"""CHARX assets kept (issue 50): the embedded files of the CHARX a persona was imported
from, besides its icon (``pa_persona_assets``), deleted with the persona.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if "pa_persona_assets" in sa.inspect(op.get_bind()).get_table_names():
        return
    op.create_table(
        "pa_persona_assets",
        sa.Column("persona_id", sa.String(63), primary_key=True),
        sa.Column("path", sa.String(300), primary_key=True),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pa_persona_assets")
