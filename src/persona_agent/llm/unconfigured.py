"""The backend used when no language model is configured: every call explains how to set one."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from persona_agent.errors import LLMNotConfiguredError
from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, TextDelta

__all__ = ["UnconfiguredBackend"]


class UnconfiguredBackend(LLMBackend):
    """Fails every call with :class:`LLMNotConfiguredError`, whose message says what to set.

    The hub still starts, serves cards and manages personas; only answers fail.
    """

    name = "none"

    @property
    def default_model(self) -> str:
        return "none"

    async def stream(self, request: ChatRequest) -> AsyncGenerator[TextDelta | StreamEnd, None]:
        """Raise :class:`LLMNotConfiguredError` on the first iteration."""
        raise LLMNotConfiguredError()
        yield  # an async generator, as the interface promises  # pragma: no cover
