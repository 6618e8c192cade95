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

from persona_agent.db import GroupCommitWriter, Sql, like_escaped
from persona_agent.memory.reembed import VectorRows

__all__ = ["Document", "KnowledgeStore", "StoredPassage"]

_DOCS = "pa_documents"
_CHUNKS = "pa_document_chunks"


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


_DOCUMENT_COLUMNS = ", ".join(
    f"{_DOCS}.{column}"
    for column in (
        "id",
        "persona_id",
        "conversation",
        "name",
        "media_type",
        "source",
        "size",
        "sha256",
        "chunks",
        "created_ms",
    )
)
"""In the order of :class:`Document`'s fields."""
_Write = tuple[Sql, list[dict[str, Any]]]

_INSERT_DOCUMENT = Sql(
    f"INSERT INTO {_DOCS} (id, persona_id, conversation, name, media_type, source, size, "
    "sha256, chunks, created_ms) VALUES (:id, :persona_id, :conversation, :name, "
    ":media_type, :source, :size, :sha256, :chunks, :created_ms)",
    table=_DOCS,
)
_INSERT_CHUNKS = Sql(
    f"INSERT INTO {_CHUNKS} (document_id, persona_id, conversation, position, page, text, "
    "model, vector) VALUES (:document_id, :persona_id, :conversation, :position, :page, "
    ":text, :model, :vector)",
    table=_CHUNKS,
)
_LIST = Sql(
    f"SELECT {_DOCUMENT_COLUMNS} FROM {_DOCS} WHERE {_DOCS}.persona_id = :persona_id "
    f"AND {_DOCS}.conversation = :conversation ORDER BY {_DOCS}.created_ms, {_DOCS}.id",
    table=_DOCS,
)
_ONE = Sql(
    f"SELECT {_DOCUMENT_COLUMNS} FROM {_DOCS} "
    f"WHERE {_DOCS}.persona_id = :persona_id AND {_DOCS}.id = :id",
    table=_DOCS,
)
_PERSONAS = Sql(f"SELECT DISTINCT {_DOCS}.persona_id FROM {_DOCS}", table=_DOCS)
_PASSAGES = Sql(
    f"SELECT {_CHUNKS}.document_id, {_DOCS}.name, {_CHUNKS}.position, {_CHUNKS}.page, "
    f"{_CHUNKS}.text, {_CHUNKS}.model, {_CHUNKS}.vector "
    f"FROM {_CHUNKS} JOIN {_DOCS} ON {_DOCS}.id = {_CHUNKS}.document_id "
    f"WHERE {_CHUNKS}.persona_id = :persona_id "
    f"AND ({_CHUNKS}.conversation = '' OR {_CHUNKS}.conversation = :conversation) "
    f"ORDER BY {_CHUNKS}.seq LIMIT :limit",
    table=_CHUNKS,
)
_DELETE_DOCUMENT = Sql(
    f"DELETE FROM {_DOCS} WHERE {_DOCS}.persona_id = :persona_id AND {_DOCS}.id = :id",
    table=_DOCS,
)
_DELETE_CHUNKS = Sql(f"DELETE FROM {_CHUNKS} WHERE {_CHUNKS}.document_id = :id", table=_CHUNKS)
_FORGET_DOCUMENTS = Sql(f"DELETE FROM {_DOCS} WHERE {_DOCS}.persona_id = :persona_id", table=_DOCS)
_FORGET_CHUNKS = Sql(
    f"DELETE FROM {_CHUNKS} WHERE {_CHUNKS}.persona_id = :persona_id", table=_CHUNKS
)
_CONVERSATIONS_LIKE = Sql(
    f"SELECT {_DOCS}.persona_id, {_DOCS}.id, {_DOCS}.conversation FROM {_DOCS} "
    f"WHERE {_DOCS}.conversation LIKE :pattern ESCAPE '\\'",
    table=_DOCS,
)
_CALLER_DOCUMENTS = Sql(
    f"SELECT {_DOCUMENT_COLUMNS} FROM {_DOCS} WHERE {_DOCS}.persona_id = :persona_id "
    f"AND {_DOCS}.conversation LIKE :pattern ESCAPE '\\' "
    f"ORDER BY {_DOCS}.created_ms, {_DOCS}.id",
    table=_DOCS,
)


class KnowledgeStore:
    """Rows of ``pa_documents`` and ``pa_document_chunks``, through the group commit."""

    def __init__(self, writer: GroupCommitWriter, *, max_passages: int = 50_000) -> None:
        """``max_passages``: the most passages one search reads (a persona's limits keep
        it far below)."""
        self._db = writer
        self._max_passages = max_passages
        self.vector_rows = VectorRows(writer, _CHUNKS)
        """The passages as re-embedding reads and writes them."""

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
        writes.append((_INSERT_DOCUMENT, [asdict(document)]))
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
        writes.append((_INSERT_CHUNKS, rows))
        await self._db.write_together(writes)
        return document

    async def documents(self, persona_id: str, conversation: str = "") -> list[Document]:
        """The documents of a persona (``conversation`` empty) or of one conversation."""
        rows = await self._db.fetch(_LIST, {"persona_id": persona_id, "conversation": conversation})
        return [Document(*row) for row in rows]

    async def document(self, persona_id: str, document_id: str) -> Document | None:
        rows = await self._db.fetch(_ONE, {"persona_id": persona_id, "id": document_id})
        return Document(*rows[0]) if rows else None

    async def personas(self) -> set[str]:
        """The personas with documents (their own or their conversations')."""
        return {row[0] for row in await self._db.fetch(_PERSONAS)}

    async def passages(self, persona_id: str, conversation: str) -> list[StoredPassage]:
        """Every passage a turn of ``conversation`` may read: the persona's documents' and
        the conversation's own."""
        rows = await self._db.fetch(
            _PASSAGES,
            {
                "persona_id": persona_id,
                "conversation": conversation,
                "limit": self._max_passages,
            },
        )
        return [StoredPassage(*row) for row in rows]

    async def delete(self, persona_id: str, document_id: str) -> None:
        """Delete a document and its passages (in one transaction)."""
        await self._db.write_together(self._deletes(persona_id, document_id))

    async def forget_persona(self, persona_id: str) -> None:
        """Delete every document of a persona, its conversations' too."""
        parameters = [{"persona_id": persona_id}]
        await self._db.write_together(
            [(_FORGET_CHUNKS, parameters), (_FORGET_DOCUMENTS, parameters)]
        )

    async def forget_conversations(self, prefix: str) -> int:
        """Delete the documents of every conversation whose key starts with ``prefix`` (an
        identified caller's: ``@{caller}:``), with every persona, and their passages; how
        many documents there were. A scan of the documents: rare, on request."""
        rows = await self._db.fetch(_CONVERSATIONS_LIKE, {"pattern": like_escaped(prefix) + "%"})
        # LIKE matches in any case on SQLite: keep the exact ones.
        found = [(persona, id_) for persona, id_, key in rows if key.startswith(prefix)]
        writes = [write for persona, id_ in found for write in self._deletes(persona, id_)]
        if writes:
            await self._db.write_together(writes)
        return len(found)

    async def caller_documents(self, persona_id: str, prefix: str) -> list[Document]:
        """The documents attached to the persona's conversations whose key starts with
        ``prefix`` (an identified caller's: ``@{caller}:``), the oldest first."""
        rows = await self._db.fetch(
            _CALLER_DOCUMENTS,
            {"persona_id": persona_id, "pattern": like_escaped(prefix) + "%"},
        )
        # LIKE matches in any case on SQLite: keep the exact ones.
        found = [Document(*row) for row in rows]
        return [document for document in found if document.conversation.startswith(prefix)]

    def _deletes(self, persona_id: str, document_id: str) -> list[_Write]:
        return [
            (_DELETE_CHUNKS, [{"id": document_id}]),
            (_DELETE_DOCUMENT, [{"persona_id": persona_id, "id": document_id}]),
        ]
