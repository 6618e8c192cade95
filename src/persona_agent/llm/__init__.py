"""LLM backends: one streaming chat interface, an implementation per kind of model server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, ToolCall, Usage
from persona_agent.llm.openai_backend import OpenAIBackend

if TYPE_CHECKING:
    from persona_agent.llm.local_backend import LocalBackend

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
    # The local backend (numpy, and llama_cpp once loaded) is imported only when
    # asked for: a hub on the openai backend never pays its memory.
    if name == "LocalBackend":
        from persona_agent.llm.local_backend import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
