"""Knowledge: the personas' documents, their search and what reading one may cost, built
from the settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from persona_agent.errors import ConfigError
from persona_agent.hub.model_backend import OPENAI_EMBEDDINGS
from persona_agent.knowledge.reader_pool import READ_IN_THREAD
from persona_agent.knowledge.sent_documents import DocumentBudget
from persona_agent.llm.base import LLMBackend
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.hub.model_backend import ModelBackend
    from persona_agent.hub.storage import Storage
    from persona_agent.knowledge.document_store import KnowledgeStore
    from persona_agent.knowledge.documents import ReadLimits
    from persona_agent.knowledge.library import Knowledge
    from persona_agent.knowledge.reader_pool import DocumentReader, ReaderProcesses
    from persona_agent.memory.embeddings import Embedder

__all__ = [
    "build_document_reader",
    "build_knowledge",
    "build_knowledge_part",
    "document_budget",
    "read_limits",
]


def read_limits(settings: Settings) -> ReadLimits:
    """What reading one document may cost (the ``PERSONA_AGENT_DOCUMENT_MAX_*`` settings):
    the same for an upload, a folder's file and a file part."""
    from persona_agent.knowledge.documents import ReadLimits

    return ReadLimits(
        max_pages=settings.document_max_pages,
        max_decoded_bytes=settings.document_max_decoded_bytes,
        max_operators=settings.document_max_operators,
        max_chars=settings.document_max_chars,
        max_seconds=settings.document_max_seconds,
    )


def build_document_reader(settings: Settings) -> ReaderProcesses:
    """The hub's document reader processes (started on the first PDF or HTML document;
    docs/security.md#documents)."""
    from persona_agent.knowledge.reader_pool import ReaderProcesses

    return ReaderProcesses(
        settings.document_workers, memory_bytes=settings.document_worker_memory_bytes
    )


def build_knowledge(
    settings: Settings,
    store: KnowledgeStore,
    llm: LLMBackend,
    embedder: Callable[[], Embedder],
    reader: DocumentReader,
    read: ReadLimits,
) -> Knowledge:
    """The personas' knowledge documents, whether memory is on or off: a persona with
    documents has them searched at each turn. The embedder is made on first need (a hub
    whose personas have no documents loads no numpy, no model).

    Raises:
        ConfigError: ``openai`` embeddings without the ``openai`` LLM backend (said at
            start-up, not at the first document).
    """
    from persona_agent.knowledge.library import Knowledge, KnowledgeLimits

    if settings.memory_embeddings == "openai" and llm.name != "openai":
        raise ConfigError(OPENAI_EMBEDDINGS)
    limits = KnowledgeLimits(
        max_bytes=settings.knowledge_max_bytes,
        max_documents=settings.knowledge_max_documents,
        max_chunks=settings.knowledge_max_chunks,
        max_persona_chunks=settings.knowledge_max_persona_chunks,
        chunk_chars=settings.knowledge_chunk_chars,
        chunk_overlap=settings.knowledge_chunk_chars // 7,
        token_budget=settings.knowledge_token_budget,
        max_passages=settings.knowledge_max_passages,
        read=read,
    )
    shared = settings.resolved_database_url.startswith("postgresql")
    return Knowledge(store, embedder, limits, shared=shared, reader=reader)


def build_knowledge_part(
    settings: Settings, storage: Storage, model: ModelBackend
) -> tuple[Knowledge, DocumentBudget]:
    """The personas' knowledge documents, on whether memory is on or off, and what the
    documents of a message may show the model (:func:`document_budget`); both read by the
    hub's document reader processes (:attr:`Knowledge.reader`, closed with the A2A parts:
    message documents are read by them too)."""
    reader = build_document_reader(settings)
    read = read_limits(settings)  # one object: the same limits for every document read
    knowledge = build_knowledge(
        settings, storage.documents, model.llm, model.embedder, reader, read
    )
    return knowledge, document_budget(settings, model.llm, read, reader)


def document_budget(
    settings: Settings,
    llm: LLMBackend,
    read: ReadLimits,
    reader: DocumentReader = READ_IN_THREAD,
) -> DocumentBudget:
    """The tokens a message's documents show the model: ``document_tokens``, and, for a
    backend that says what a prompt may take (the embedded model: its context less its
    answer), no more than a quarter of that in tokens of 4 characters: digits and
    punctuation take up to twice as many on its tokenizer (2 characters a token), so the
    documents fill at most half the prompt, the other half the persona and the conversation.
    ``read``: what reading one may cost (:func:`read_limits`, the hub's one object)."""
    tokens = settings.document_tokens
    if llm.prompt_tokens is not None:
        tokens = min(tokens, llm.prompt_tokens // 4)
    return DocumentBudget(tokens, read, reader)
