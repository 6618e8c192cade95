"""LLM backends: one streaming chat interface, an implementation per kind of model server."""

from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, ToolCall, Usage
from persona_agent.llm.local_backend import LocalBackend
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
