"""Replicas: task versions and writers, task events, live replicas, personas.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25

Each part is made only where missing (a database made by ``metadata.create_all`` while
replicas were being built may hold some of it).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None

_Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER only


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    tables = set(inspector.get_table_names())
    columns = {column["name"] for column in inspector.get_columns("pa_tasks")}
    # The SDK's TaskVersion (compare-and-swap), and the replica whose lease covers the task.
    if "version" not in columns:
        op.add_column(
            "pa_tasks", sa.Column("version", sa.BigInteger(), nullable=False, server_default="0")
        )
    if "replica" not in columns:
        op.add_column("pa_tasks", sa.Column("replica", sa.String(100), nullable=True))
    _create_missing_indexes(
        inspector,
        "pa_tasks",
        existed=True,
        indexes={"ix_pa_tasks_replica_state": ["replica", "state"]},
    )

    if "pa_task_events" not in tables:
        op.create_table(
            "pa_task_events",
            sa.Column("seq", _Seq, primary_key=True, autoincrement=True),
            sa.Column("task_id", sa.String(200), nullable=False),
            sa.Column("version", sa.BigInteger(), nullable=False),
            sa.Column("data", sa.LargeBinary(), nullable=False),
            sa.Column(
                "created_at",
                sa.DateTime(timezone=True),
                nullable=False,
                server_default=sa.func.now(),
            ),
        )
    _create_missing_indexes(
        inspector,
        "pa_task_events",
        existed="pa_task_events" in tables,
        indexes={"ix_pa_task_events_task": ["task_id", "version"]},
    )
    if "pa_replicas" not in tables:
        op.create_table(
            "pa_replicas",
            sa.Column("id", sa.String(100), primary_key=True),
            sa.Column(
                "started_at",
                sa.DateTime(timezone=True),
                nullable=False,
                server_default=sa.func.now(),
            ),
            sa.Column(
                "heartbeat_at",
                sa.DateTime(timezone=True),
                nullable=False,
                server_default=sa.func.now(),
            ),
        )
    if "pa_personas" not in tables:
        op.create_table(
            "pa_personas",
            sa.Column("id", sa.String(63), primary_key=True),
            sa.Column("version", sa.String(64), nullable=False),
            sa.Column("document", sa.Text(), nullable=False),
            sa.Column("image", sa.LargeBinary(), nullable=True),
            sa.Column("source_hash", sa.String(64), nullable=True),
            sa.Column(
                "updated_at",
                sa.DateTime(timezone=True),
                nullable=False,
                server_default=sa.func.now(),
            ),
        )


def downgrade() -> None:
    op.drop_table("pa_personas")
    op.drop_table("pa_replicas")
    op.drop_index("ix_pa_task_events_task", table_name="pa_task_events")
    op.drop_table("pa_task_events")
    with op.batch_alter_table("pa_tasks") as batch:
        batch.drop_index("ix_pa_tasks_replica_state")
        batch.drop_column("replica")
        batch.drop_column("version")


def _create_missing_indexes(
    inspector: sa.Inspector, table: str, *, existed: bool, indexes: dict[str, list[str]]
) -> None:
    present = {index["name"] for index in inspector.get_indexes(table)} if existed else set()
    for name, columns in indexes.items():
        if name not in present:
            op.create_index(name, table, columns)
