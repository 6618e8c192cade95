"""Memory: an index by scope and embedder, which answers a search's first question (has
the scope changed: its row count and highest seq) without reading the rows.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None

_NAME = "ix_pa_memories_model_scope"


def upgrade() -> None:
    indexes = sa.inspect(op.get_bind()).get_indexes("pa_memories")
    if any(index["name"] == _NAME for index in indexes):
        return
    op.create_index(_NAME, "pa_memories", ["persona_id", "owner", "model", "conversation", "seq"])


def downgrade() -> None:
    op.drop_index(_NAME, table_name="pa_memories")
