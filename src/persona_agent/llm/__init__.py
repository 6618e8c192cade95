"""LLM backends: one streaming chat interface, an implementation per kind of model server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, ToolCall, Usage

if TYPE_CHECKING:
    from persona_agent.llm.local.backend import LocalBackend
    from persona_agent.llm.openai_backend import OpenAIBackend

__all__ = [
    "ChatRequest",
    "LLMBackend",
    "LocalBackend",
    "OpenAIBackend",
    "StreamEnd",
    "TextDelta",
    "ToolCall",
    "Usage",
]


def __getattr__(name: str) -> Any:
    # Each backend is imported only when asked for: a hub on the openai backend never
    # pays the local one's memory (numpy, and xllamacpp once loaded), nor a hub on the
    # local model (or a CLI command) aiohttp's (~8 MB).
    if name == "LocalBackend":
        from persona_agent.llm.local.backend import LocalBackend

        return LocalBackend
    if name == "OpenAIBackend":
        from persona_agent.llm.openai_backend import OpenAIBackend

        return OpenAIBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
