"""Knowledge's tables: the documents (``pa_documents``) and their passages, each with its
vector (``pa_document_chunks``), made on the hub's :data:`persona_agent.db.metadata` (read
and written by :mod:`persona_agent.knowledge.document_store`, which names them in its SQL).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, LargeBinary, String, Table, Text

from persona_agent.db import SEQ, metadata

__all__ = ["document_chunks_table", "documents_table"]

documents_table = Table(
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
"""The documents, without their text."""

document_chunks_table = Table(
    "pa_document_chunks",
    metadata,
    Column("seq", SEQ, primary_key=True, autoincrement=True),
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
"""The documents' passages, each with its vector."""
