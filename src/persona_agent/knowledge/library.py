"""A hub's knowledge documents: taken in (read, cut into passages, embedded, stored, within
limits), listed, deleted, and searched for each turn.

Every check comes before anything is stored: a file that cannot be taken (its type, its
size, corrupt, too many passages, one document too many) raises a
:class:`~persona_agent.errors.DocumentError` naming it, and the store is as it was.
Numpy, pypdf and the embedding model are loaded on first need: a hub whose personas
have no documents loads none of them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from persona_agent.errors import DocumentLimitError, DocumentNotFoundError, DocumentTooLargeError
from persona_agent.knowledge.chunking import chunk_pages
from persona_agent.knowledge.document_store import Document, KnowledgeStore, StoredPassage
from persona_agent.knowledge.documents import (
    DEFAULT_LIMITS,
    ReadLimits,
    document_type,
)
from persona_agent.knowledge.reader_pool import READ_IN_THREAD, DocumentReader
from persona_agent.knowledge.turn import AttachedFile, FoundPassages, Passage, TurnKnowledge

if TYPE_CHECKING:
    from persona_agent.memory.embeddings import Embedder
    from persona_agent.memory.reembed import Reembedder

__all__ = ["Knowledge", "KnowledgeLimits"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KnowledgeLimits:
    """What one document, one persona and one turn may hold (the settings'
    ``PERSONA_AGENT_KNOWLEDGE_*``)."""

    max_bytes: int = 10 * 1024 * 1024
    """A document's bytes, at most."""
    max_documents: int = 100
    """Documents of one persona (and, apart, of one conversation), at most."""
    max_chunks: int = 500
    """Passages of one document, at most: the work of embedding it is bounded."""
    max_persona_chunks: int = 5000
    """Passages of one persona's documents together (and of one conversation's): what a
    turn's search reads is bounded."""
    chunk_chars: int = 600
    chunk_overlap: int = 85
    token_budget: int = 600
    """Tokens of passages in a turn's prompt, at most (characters / 4)."""
    max_passages: int = 4
    """Passages in a turn's prompt, at most."""
    read: ReadLimits = DEFAULT_LIMITS
    """What reading one PDF may cost (``PERSONA_AGENT_DOCUMENT_MAX_PAGES``,
    ``..._MAX_DECODED_BYTES``): the same for an upload, a folder's file, a file part."""


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A document read, cut and embedded, not stored yet."""

    name: str
    media_type: str
    size: int
    sha256: str
    model: str
    passages: list[tuple[int, int | None, str, bytes]]


class Knowledge(TurnKnowledge):
    """Documents in ``store``, embedded by ``embedder()`` (made on first use), within
    ``limits``. One document is taken in at a time per persona, so two uploads cannot
    both pass the count.

    A hub alone on its database (not ``shared``) knows which personas have documents
    (read once, then kept as documents are added): a turn of a persona without any
    reads nothing from the database. Replicas (``shared``), where another process may
    add a document, search at every turn."""

    def __init__(
        self,
        store: KnowledgeStore,
        embedder: Callable[[], Embedder],
        limits: KnowledgeLimits | None = None,
        *,
        shared: bool = False,
        reader: DocumentReader = READ_IN_THREAD,
    ) -> None:
        """``reader``: who reads a file's text (the hub: its reader processes, which it
        closes itself)."""
        self.store = store
        self.shared = shared
        self.reader = reader
        self._with_documents: set[str] | None = None
        """Personas that may have documents (not ``shared``): read on first need."""
        self.limits = limits if limits is not None else KnowledgeLimits()
        self._make_embedder = embedder
        self._embedder: Embedder | None = None
        self.reembedder: Reembedder | None = None
        """Re-embeds passages another embedder made, once a search met some."""
        self._locks: dict[str, asyncio.Lock] = {}

    def _reembed(self, embedder: Embedder) -> None:
        """Start re-embedding the passages another embedder made (once)."""
        if self.reembedder is None:
            from persona_agent.memory.reembed import Reembedder

            self.reembedder = Reembedder(self.store.vector_rows, embedder, what="passages")
            self.reembedder.start()

    async def aclose(self) -> None:
        """Stop re-embedding."""
        if self.reembedder is not None:
            await self.reembedder.aclose()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = self._make_embedder()
        return self._embedder

    async def add(
        self,
        persona_id: str,
        name: str,
        data: bytes,
        media_type: str | None = None,
        *,
        conversation: str = "",
        source: str = "upload",
    ) -> Document:
        """Take in one document of the persona (``conversation`` empty) or of one
        conversation; one of the same name there is replaced.

        Raises:
            DocumentError: the file cannot be taken (see the module); nothing stored.
        """
        prepared = await self._prepare(name, data, media_type)
        async with self._lock(persona_id):
            [document] = await self._store(persona_id, conversation, source, [prepared])
            return document

    async def documents(self, persona_id: str) -> list[Document]:
        """The persona's own documents (not its conversations')."""
        return await self.store.documents(persona_id)

    async def delete(self, persona_id: str, document_id: str) -> Document:
        """Delete one of the persona's own documents and its passages (a conversation's
        is not found here: see :meth:`delete_attached`).

        Raises:
            DocumentNotFoundError: the persona has no document of this id.
        """
        return await self._delete(persona_id, "", document_id)

    async def attached(self, persona_id: str, prefix: str) -> list[Document]:
        """The documents attached to the persona's conversations whose key starts with
        ``prefix`` (an identified caller's, ``@{caller}:``), the oldest first."""
        return await self.store.caller_documents(persona_id, prefix)

    async def delete_attached(self, persona_id: str, prefix: str, document_id: str) -> Document:
        """Delete a document attached to one of the conversations of ``prefix`` (an
        identified caller's) with the persona, and its passages.

        Raises:
            DocumentNotFoundError: no such document in those conversations (another
                caller's is not found either).
        """
        return await self._delete(persona_id, prefix, document_id)

    async def _delete(self, persona_id: str, prefix: str, document_id: str) -> Document:
        """Delete the document if it is the persona's own (``prefix`` empty) or of a
        conversation that starts with ``prefix``."""
        async with self._lock(persona_id):
            document = await self.store.document(persona_id, document_id)
            if document is None or (
                not document.conversation.startswith(prefix) if prefix else document.conversation
            ):
                raise DocumentNotFoundError(
                    f"No document '{document_id}' in the caller's conversations with persona "
                    f"'{persona_id}'"
                    if prefix
                    else f"Persona '{persona_id}' has no document '{document_id}'"
                )
            await self.store.delete(persona_id, document_id)
            return document

    async def for_turn(
        self,
        persona_id: str,
        conversation: str,
        message: str,
        files: Sequence[AttachedFile] = (),
    ) -> FoundPassages:
        """As :meth:`TurnKnowledge.for_turn`. When the embedder fails (an endpoint down),
        the turn goes on without passages, and the error is logged."""
        if files:
            prepared = [await self._prepare(f.name, f.data, f.media_type) for f in files]
            async with self._lock(persona_id):
                await self._store(persona_id, conversation, "a2a", prepared)
        try:
            return await self._search(persona_id, conversation, message)
        except Exception:
            logger.exception("persona %s: its documents could not be searched", persona_id)
            return FoundPassages()

    async def _search(self, persona_id: str, conversation: str, message: str) -> FoundPassages:
        if not self.shared and persona_id not in await self._maybe_with_documents():
            return FoundPassages()  # a hub alone on its database knows: nothing to read
        stored = await self.store.passages(persona_id, conversation)
        if not stored or not message.strip():
            return FoundPassages()
        from persona_agent.knowledge.passages import select_passages, vectors_of

        embedder = self.embedder
        found = [passage for passage in stored if passage.model == embedder.name]
        if len(found) < len(stored):  # another embedder's: re-embedded in the background
            self._reembed(embedder)
        if not found:
            return FoundPassages()
        stored = found
        query = await embedder.embed([message], query=True)
        limits = self.limits

        def select() -> FoundPassages:
            left_out: list[tuple[StoredPassage, str]] = []
            chosen = select_passages(
                message,
                query[0],
                stored,
                vectors_of(stored),
                token_budget=limits.token_budget,
                max_passages=limits.max_passages,
                left_out=left_out,
            )
            return FoundPassages(map(_passage, chosen), ((_passage(p), why) for p, why in left_out))

        return await asyncio.to_thread(select)  # linear in the passages: off the loop

    async def _maybe_with_documents(self) -> set[str]:
        """The personas that may have documents (a hub alone on its database): read from
        the database once, then kept as documents are stored."""
        known = self._with_documents
        if known is None:
            read = await self.store.personas()
            known = self._with_documents
            if known is None:  # else a store read it meanwhile, and may have added to it
                known = self._with_documents = read
        return known

    async def _prepare(self, name: str, data: bytes, media_type: str | None) -> _Prepared:
        """Read, cut and embed a file, checking each limit on the way."""
        name = _clean_name(name)
        kind = document_type(name, media_type)
        limits = self.limits
        if len(data) > limits.max_bytes:
            raise DocumentTooLargeError(
                f"{name}: {len(data):,} bytes, over the limit of {limits.max_bytes:,} "
                "(PERSONA_AGENT_KNOWLEDGE_MAX_BYTES)"
            )

        pages = await self.reader.read(name, data, kind, limits.read)

        def cut() -> list[tuple[int, int | None, str]]:
            chunks = chunk_pages(
                name,
                pages,
                size=limits.chunk_chars,
                overlap=limits.chunk_overlap,
                max_chunks=limits.max_chunks,
            )
            return [(chunk.position, chunk.page, chunk.text) for chunk in chunks]

        chunks = await asyncio.to_thread(cut)  # linear in the text: off the loop
        embedder = self.embedder
        vectors = await embedder.embed([text for _, _, text in chunks])
        passages = [
            (position, page, text, vector.astype("<f4").tobytes())
            for (position, page, text), vector in zip(chunks, vectors, strict=True)
        ]
        digest = hashlib.sha256(data).hexdigest()
        return _Prepared(name, kind, len(data), digest, embedder.name, passages)

    async def _store(
        self, persona_id: str, conversation: str, source: str, prepared: list[_Prepared]
    ) -> list[Document]:
        """Store prepared documents if the limits allow them all (under the persona's
        lock): each is checked before any is stored."""
        limits = self.limits
        held = {d.name: d for d in await self.store.documents(persona_id, conversation)}
        replacing: list[str | None] = []
        whose = "the conversation" if conversation else f"persona '{persona_id}'"
        for document in prepared:
            old = held.pop(document.name, None)
            replacing.append(old.id if old is not None else None)
            if len(held) >= limits.max_documents:
                raise DocumentLimitError(
                    f"{document.name}: {whose} has {len(held)} documents, the most it may "
                    "have (PERSONA_AGENT_KNOWLEDGE_MAX_DOCUMENTS): delete one first"
                )
            passages = sum(d.chunks for d in held.values()) + len(document.passages)
            if passages > limits.max_persona_chunks:
                raise DocumentLimitError(
                    f"{document.name}: with it, {whose}'s documents would have {passages} "
                    f"passages, over the limit of {limits.max_persona_chunks} "
                    "(PERSONA_AGENT_KNOWLEDGE_MAX_PERSONA_CHUNKS): delete a document first"
                )
            held[document.name] = _counted(document)
        stored = []
        if not self.shared:  # before: a turn may search meanwhile
            (await self._maybe_with_documents()).add(persona_id)
        for document, old_id in zip(prepared, replacing, strict=True):
            stored.append(
                await self.store.add(
                    persona_id=persona_id,
                    conversation=conversation,
                    name=document.name,
                    media_type=document.media_type,
                    source=source,
                    size=document.size,
                    sha256=document.sha256,
                    model=document.model,
                    passages=document.passages,
                    replacing=old_id,
                )
            )
        return stored

    def _lock(self, persona_id: str) -> asyncio.Lock:
        lock = self._locks.get(persona_id)
        if lock is None:
            lock = self._locks[persona_id] = asyncio.Lock()
        return lock


def _passage(stored: StoredPassage) -> Passage:
    return Passage(stored.document_id, stored.name, stored.position, stored.page, stored.text)


def _counted(document: _Prepared) -> Document:
    """A prepared document as the limits count it (its passages), before it is stored."""
    return Document("", "", "", document.name, "", "", 0, "", len(document.passages), 0)


def _clean_name(name: str) -> str:
    """A file's own name (no directories), printable, at most 255 characters."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip()
    return base[:255] or "document"
