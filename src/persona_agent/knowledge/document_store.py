"""Knowledge documents and their passages in the hub's database (SQLite or PostgreSQL).

A document belongs to a persona (``conversation`` empty: every conversation with it
reads it) or to one conversation of it (a file sent over A2A). A document and its
passages are written in one transaction, and deleted in one: a search never sees half
a document. Vectors are float32 bytes beside the text, as memory's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    insert,
    or_,
    select,
)
from sqlalchemy.sql import Executable

from persona_agent.db import SEQ, GroupCommitWriter, like_escaped, metadata
from persona_agent.memory.reembed import VectorRows

__all__ = [
    "Document",
    "KnowledgeStore",
    "StoredPassage",
    "document_chunks_table",
    "documents_table",
]

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


@dataclass(frozen=True, slots=True)
class Document:
    """A document as listed: no text, no passages."""

    id: str
    persona_id: str
    conversation: str
    name: str
    media_type: str
    source: str
    size: int
    sha256: str
    chunks: int
    created_ms: int

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "mediaType": self.media_type,
            "source": self.source,
            "bytes": self.size,
            "sha256": self.sha256,
            "chunks": self.chunks,
            "created": self.created_ms,
        }


@dataclass(frozen=True, slots=True)
class StoredPassage:
    """A passage read back for a search: its document, place, text and vector bytes."""

    document_id: str
    name: str
    position: int
    page: int | None
    text: str
    model: str
    vector: bytes


_DOCUMENT_COLUMNS = tuple(documents_table.c)
"""In the order of :class:`Document`'s fields."""
_Write = tuple[Executable, list[dict[str, Any]]]


class KnowledgeStore:
    """Rows of ``pa_documents`` and ``pa_document_chunks``, through the group commit."""

    def __init__(self, writer: GroupCommitWriter, *, max_passages: int = 50_000) -> None:
        """``max_passages``: the most passages one search reads (a persona's limits keep
        it far below)."""
        self._db = writer
        self.vector_rows = VectorRows(writer, document_chunks_table)
        """The passages as re-embedding reads and writes them."""
        self._insert_document = insert(documents_table)
        self._insert_chunks = insert(document_chunks_table)
        docs, chunks = documents_table.c, document_chunks_table.c
        persona = docs.persona_id == bindparam("persona_id")
        self._list = (
            select(*_DOCUMENT_COLUMNS)
            .where(persona, docs.conversation == bindparam("conversation"))
            .order_by(docs.created_ms, docs.id)
        )
        self._one = select(*_DOCUMENT_COLUMNS).where(persona, docs.id == bindparam("id"))
        self._personas = select(docs.persona_id).distinct()
        self._passages = (
            select(
                chunks.document_id,
                docs.name,
                chunks.position,
                chunks.page,
                chunks.text,
                chunks.model,
                chunks.vector,
            )
            .join(documents_table, docs.id == chunks.document_id)
            .where(
                chunks.persona_id == bindparam("persona_id"),
                or_(chunks.conversation == "", chunks.conversation == bindparam("conversation")),
            )
            .order_by(chunks.seq)
            .limit(max_passages)
        )
        self._delete_document = delete(documents_table).where(
            and_(persona, docs.id == bindparam("id"))
        )
        self._delete_chunks = delete(document_chunks_table).where(
            chunks.document_id == bindparam("id")
        )
        self._forget_documents = delete(documents_table).where(persona)
        self._forget_chunks = delete(document_chunks_table).where(
            chunks.persona_id == bindparam("persona_id")
        )

    async def add(
        self,
        *,
        persona_id: str,
        conversation: str,
        name: str,
        media_type: str,
        source: str,
        size: int,
        sha256: str,
        model: str,
        passages: Sequence[tuple[int, int | None, str, bytes]],
        replacing: str | None = None,
    ) -> Document:
        """Store a document and its passages ((position, page, text, vector bytes) each),
        in one transaction; ``replacing``: the id of a document this one takes the place
        of (deleted in the same transaction)."""
        document = Document(
            id=str(uuid.uuid4()),
            persona_id=persona_id,
            conversation=conversation,
            name=name,
            media_type=media_type,
            source=source,
            size=size,
            sha256=sha256,
            chunks=len(passages),
            created_ms=int(time.time() * 1000),
        )
        writes: list[_Write] = []
        if replacing is not None:
            writes += self._deletes(persona_id, replacing)
        writes.append((self._insert_document, [asdict(document)]))
        rows = [
            {
                "document_id": document.id,
                "persona_id": persona_id,
                "conversation": conversation,
                "position": position,
                "page": page,
                "text": text,
                "model": model,
                "vector": vector,
            }
            for position, page, text, vector in passages
        ]
        writes.append((self._insert_chunks, rows))
        await self._db.write_together(writes)
        return document

    async def documents(self, persona_id: str, conversation: str = "") -> list[Document]:
        """The documents of a persona (``conversation`` empty) or of one conversation."""
        rows = await self._db.fetch(
            self._list, {"persona_id": persona_id, "conversation": conversation}
        )
        return [Document(*row) for row in rows]

    async def document(self, persona_id: str, document_id: str) -> Document | None:
        rows = await self._db.fetch(self._one, {"persona_id": persona_id, "id": document_id})
        return Document(*rows[0]) if rows else None

    async def personas(self) -> set[str]:
        """The personas with documents (their own or their conversations')."""
        return {row[0] for row in await self._db.fetch(self._personas)}

    async def passages(self, persona_id: str, conversation: str) -> list[StoredPassage]:
        """Every passage a turn of ``conversation`` may read: the persona's documents' and
        the conversation's own."""
        rows = await self._db.fetch(
            self._passages, {"persona_id": persona_id, "conversation": conversation}
        )
        return [StoredPassage(*row) for row in rows]

    async def delete(self, persona_id: str, document_id: str) -> None:
        """Delete a document and its passages (in one transaction)."""
        await self._db.write_together(self._deletes(persona_id, document_id))

    async def forget_persona(self, persona_id: str) -> None:
        """Delete every document of a persona, its conversations' too."""
        parameters = [{"persona_id": persona_id}]
        await self._db.write_together(
            [(self._forget_chunks, parameters), (self._forget_documents, parameters)]
        )

    async def forget_conversations(self, prefix: str) -> int:
        """Delete the documents of every conversation whose key starts with ``prefix`` (an
        identified caller's: ``@{caller}:``), with every persona, and their passages; how
        many documents there were. A scan of the documents: rare, on request."""
        docs = documents_table.c
        rows = await self._db.fetch(
            select(docs.persona_id, docs.id, docs.conversation).where(
                docs.conversation.like(bindparam("pattern"), escape="\\")
            ),
            {"pattern": like_escaped(prefix) + "%"},
        )
        # LIKE matches in any case on SQLite: keep the exact ones.
        found = [(persona, id_) for persona, id_, key in rows if key.startswith(prefix)]
        writes = [write for persona, id_ in found for write in self._deletes(persona, id_)]
        if writes:
            await self._db.write_together(writes)
        return len(found)

    async def caller_documents(self, persona_id: str, prefix: str) -> list[Document]:
        """The documents attached to the persona's conversations whose key starts with
        ``prefix`` (an identified caller's: ``@{caller}:``), the oldest first."""
        docs = documents_table.c
        rows = await self._db.fetch(
            select(*_DOCUMENT_COLUMNS)
            .where(
                docs.persona_id == bindparam("persona_id"),
                docs.conversation.like(bindparam("pattern"), escape="\\"),
            )
            .order_by(docs.created_ms, docs.id),
            {"persona_id": persona_id, "pattern": like_escaped(prefix) + "%"},
        )
        # LIKE matches in any case on SQLite: keep the exact ones.
        found = [Document(*row) for row in rows]
        return [document for document in found if document.conversation.startswith(prefix)]

    def _deletes(self, persona_id: str, document_id: str) -> list[_Write]:
        return [
            (self._delete_chunks, [{"id": document_id}]),
            (self._delete_document, [{"persona_id": persona_id, "id": document_id}]),
        ]
