"""Knowledge: documents of personas and conversations, and their passages with vectors.

Revision ID: 0008
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    tables = sa.inspect(op.get_bind()).get_table_names()
    if "pa_documents" not in tables:
        op.create_table(
            "pa_documents",
            sa.Column("id", sa.String(36), primary_key=True),
            sa.Column("persona_id", sa.String(63), nullable=False),
            sa.Column("conversation", sa.String(300), nullable=False),
            sa.Column("name", sa.String(255), nullable=False),
            sa.Column("media_type", sa.String(100), nullable=False),
            sa.Column("source", sa.String(20), nullable=False),
            sa.Column("size", sa.BigInteger(), nullable=False),
            sa.Column("sha256", sa.String(64), nullable=False),
            sa.Column("chunks", sa.Integer(), nullable=False),
            sa.Column("created_ms", sa.BigInteger(), nullable=False),
        )
        op.create_index(
            "ix_pa_documents_persona", "pa_documents", ["persona_id", "conversation", "name"]
        )
    if "pa_document_chunks" not in tables:
        op.create_table(
            "pa_document_chunks",
            sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
            sa.Column("document_id", sa.String(36), nullable=False),
            sa.Column("persona_id", sa.String(63), nullable=False),
            sa.Column("conversation", sa.String(300), nullable=False),
            sa.Column("position", sa.Integer(), nullable=False),
            sa.Column("page", sa.Integer(), nullable=True),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("model", sa.String(100), nullable=False),
            sa.Column("vector", sa.LargeBinary(), nullable=False),
        )
        op.create_index(
            "ix_pa_document_chunks_scope", "pa_document_chunks", ["persona_id", "conversation"]
        )
        op.create_index("ix_pa_document_chunks_document", "pa_document_chunks", ["document_id"])


def downgrade() -> None:
    op.drop_index("ix_pa_document_chunks_document", table_name="pa_document_chunks")
    op.drop_index("ix_pa_document_chunks_scope", table_name="pa_document_chunks")
    op.drop_table("pa_document_chunks")
    op.drop_index("ix_pa_documents_persona", table_name="pa_documents")
    op.drop_table("pa_documents")
