"""What the chat engine reports while it answers; it knows nothing of A2A."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from persona_agent.llm.base import Progress, ToolCall, Usage

__all__ = ["ChatEvent", "Done", "Progress", "Token", "ToolEnd", "ToolOutput", "ToolStart"]


@dataclass(frozen=True, slots=True)
class Token:
    """A piece of the answer, as the model produces it."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolStart:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a running tool streams before its result (a consulted persona's answer as it
    grows); ``data``: where it comes from."""

    call_id: str
    name: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolEnd:
    call_id: str
    name: str
    result: str
    is_error: bool
    data: dict[str, Any] = field(default_factory=dict)
    """Facts about the call for the client (e.g. the consulted task's id)."""
    duration_ms: float = 0.0
    """How long the call took, its progress included."""


@dataclass(frozen=True, slots=True)
class Done:
    """The answer is complete; ``text`` is everything the tokens carried."""

    text: str
    usage: Usage
    model: str
    duration_ms: int
    llm_calls: int
    tool_calls: int
    cost_usd: float | None = None
    """What the turn cost in US dollars, when its model has a price
    (:mod:`persona_agent.observe.pricing`)."""
    question: str | None = None
    """The turn waits for the user's answer to this question of a tool (the A2A task is
    ``input-required``); ``text`` is what the model said before it, if anything."""
    demo_model: bool = False
    """The answer comes from the embedded demo model (:attr:`LLMBackend.demo_model`)."""
    remembered: tuple[str, ...] = ()
    """What memory brought into the turn's prompt (docs/memory.md), each item marked with
    who said it, for the client to show."""
    citations: tuple[dict[str, Any], ...] = ()
    """The passages of the persona's documents the answer was given, in their order in the
    prompt (``[1]`` first): document, documentId, passage, page."""
    cut: bool = False
    """The last model call stopped at its token cap (``finish_reason: length``)."""
    handed: tuple[ToolCall, ...] = ()
    """Calls of the caller's own tools the turn ends with, for the caller to run
    (:mod:`persona_agent.chat.supplied`); ``text`` is what the model said with them."""


ChatEvent = Token | Progress | ToolStart | ToolOutput | ToolEnd | Done
""":class:`Progress` is the backend's own (the embedded model loading, waiting, reading),
passed on as it comes."""
