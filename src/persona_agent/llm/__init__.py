"""LLM backends: one streaming chat interface, an implementation per kind of model server."""

from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta, ToolCall, Usage
from persona_agent.llm.openai_backend import OpenAIBackend
from persona_agent.llm.unconfigured import UnconfiguredBackend

__all__ = [
    "ChatRequest",
    "LLMBackend",
    "OpenAIBackend",
    "StreamEnd",
    "TextDelta",
    "ToolCall",
    "UnconfiguredBackend",
    "Usage",
]
