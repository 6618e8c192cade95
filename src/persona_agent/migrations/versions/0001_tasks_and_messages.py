"""Tasks and conversation messages: the schema before replicas.

Revision ID: 0001
Revises:
Create Date: 2026-11-25

Databases made before migrations (by ``metadata.create_all``) hold these tables already,
and no ``alembic_version``: only what is missing is created, so this revision takes them
over as they are.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    tables = set(inspector.get_table_names())
    if "pa_tasks" not in tables:
        op.create_table(
            "pa_tasks",
            sa.Column("owner", sa.String(200), primary_key=True),
            sa.Column("id", sa.String(200), primary_key=True),
            sa.Column("context_id", sa.String(200), nullable=False),
            sa.Column("state", sa.Integer(), nullable=False),
            sa.Column("sort_ts", sa.BigInteger(), nullable=False),
            sa.Column("data", sa.LargeBinary(), nullable=False),
        )
    _create_missing_indexes(
        inspector,
        "pa_tasks",
        existed="pa_tasks" in tables,
        indexes={
            "ix_pa_tasks_owner_order": ["owner", "sort_ts", "id"],
            "ix_pa_tasks_owner_context": ["owner", "context_id"],
        },
    )
    if "pa_messages" not in tables:
        op.create_table(
            "pa_messages",
            sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
            sa.Column("conversation", sa.String(300), nullable=False),
            sa.Column("message", sa.Text(), nullable=False),
        )
    _create_missing_indexes(
        inspector,
        "pa_messages",
        existed="pa_messages" in tables,
        indexes={"ix_pa_messages_conversation": ["conversation", "seq"]},
    )


def downgrade() -> None:
    op.drop_table("pa_messages")
    op.drop_table("pa_tasks")


def _create_missing_indexes(
    inspector: sa.Inspector, table: str, *, existed: bool, indexes: dict[str, list[str]]
) -> None:
    present = {index["name"] for index in inspector.get_indexes(table)} if existed else set()
    for name, columns in indexes.items():
        if name not in present:
            op.create_index(name, table, columns)
