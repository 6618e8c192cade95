"""The knowledge documents' tables: documents of personas and conversations, and their
passages with vectors (:mod:`persona_agent.knowledge.document_store`), made on the hub's
:data:`persona_agent.db.metadata` by :mod:`persona_agent.db` (a module of their own: that
one keeps to the house's size)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.types import TypeEngine

__all__ = ["document_tables"]


def document_tables(metadata: MetaData, seq: TypeEngine[int]) -> tuple[Table, Table]:
    """``pa_documents`` and ``pa_document_chunks`` on ``metadata``; ``seq``: the type of an
    autoincremented key."""
    documents = Table(
        "pa_documents",
        metadata,
        Column("id", String(36), primary_key=True),
        Column("persona_id", String(63), nullable=False),
        Column("conversation", String(300), nullable=False),  # "": the persona's own, for all
        Column("name", String(255), nullable=False),
        Column("media_type", String(100), nullable=False),
        Column("source", String(20), nullable=False),  # upload, directory or a2a
        Column("size", BigInteger, nullable=False),  # bytes
        Column("sha256", String(64), nullable=False),
        Column("chunks", Integer, nullable=False),
        Column("created_ms", BigInteger, nullable=False),  # ms since the epoch
        Index("ix_pa_documents_persona", "persona_id", "conversation", "name"),
    )
    chunks = Table(
        "pa_document_chunks",
        metadata,
        Column("seq", seq, primary_key=True, autoincrement=True),
        Column("document_id", String(36), nullable=False),
        Column("persona_id", String(63), nullable=False),
        Column("conversation", String(300), nullable=False),  # as its document's
        Column("position", Integer, nullable=False),  # its place in the document, from 0
        Column("page", Integer, nullable=True),  # the PDF page it starts on
        Column("text", Text, nullable=False),
        Column("model", String(100), nullable=False),  # the embedder that made the vector
        Column("vector", LargeBinary, nullable=False),  # float32, little-endian, unit length
        Index("ix_pa_document_chunks_scope", "persona_id", "conversation"),
        Index("ix_pa_document_chunks_document", "document_id"),
    )
    return documents, chunks
