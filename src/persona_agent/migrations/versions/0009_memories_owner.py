"""Memory: an index by owner, so that forgetting a caller (``DELETE /api/v1/memories``:
its records with every persona) finds them without reading the whole table (the other
indexes of ``pa_memories`` start with the persona).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

_NAME = "ix_pa_memories_owner"


def upgrade() -> None:
    indexes = sa.inspect(op.get_bind()).get_indexes("pa_memories")
    if any(index["name"] == _NAME for index in indexes):  # made by create_all of today
        return
    op.create_index(_NAME, "pa_memories", ["owner"])


def downgrade() -> None:
    op.drop_index(_NAME, table_name="pa_memories")
