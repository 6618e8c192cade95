"""What the chat engine reports while it answers; it knows nothing of A2A."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from persona_agent.llm.base import Usage

__all__ = ["ChatEvent", "Done", "Token", "ToolEnd", "ToolStart"]


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
class ToolEnd:
    call_id: str
    name: str
    result: str
    is_error: bool


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
    (:mod:`persona_agent.pricing`)."""


ChatEvent = Token | ToolStart | ToolEnd | Done
