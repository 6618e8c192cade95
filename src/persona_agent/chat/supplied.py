"""A turn whose conversation the caller sends whole: a stateless door (the OpenAI-compatible
chat completions, docs/openai.md) brings the messages before the new one, its own
instructions, its own tools and its sampling, and keeps nothing between requests.

The engine answers such a turn as any other (the persona's prompt, lore, memory,
documents and tools), with four differences, each a function here: the history is the
caller's, not the stored one (:mod:`.turn_modes`); the caller's tools are offered beside
the persona's (:func:`offered`); the caller's sampling bounds the persona's
(:func:`sampling`); a call of one of the caller's tools ends the turn, handed back to the
caller to run (:func:`handed_back`). Nothing of the turn is written to the conversation
history (the caller holds the conversation), though memory keeps what was said.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from persona_agent.llm.base import Message, StreamEnd, ToolCall
from persona_agent.personas.model import Persona

__all__ = ["SuppliedTurn", "handed_back", "offered", "sampling"]


@dataclass(frozen=True, slots=True)
class SuppliedTurn:
    """What the caller sends with its message."""

    history: tuple[Message, ...] = ()
    """The conversation before the new message, in the OpenAI format (tool calls and
    results included); the caller's own instructions first, as a system message after the
    persona's."""
    tools: tuple[dict[str, Any], ...] = ()
    """The caller's tools (OpenAI ``tools`` entries), run by the caller."""
    temperature: float | None = None
    max_tokens: int | None = None
    """The answer's tokens at most: the persona's own cap still holds when lower."""
    stop: tuple[str, ...] = ()
    answers_history: bool = False
    """The caller's last message is no user's (its tools' results, or the start of the
    answer): the turn's message only labels its task, and the model goes on from the
    history."""
    names: frozenset[str] = field(init=False)
    """The caller's tools' names."""

    def __post_init__(self) -> None:
        names = frozenset(_name(spec) for spec in self.tools) - {""}
        object.__setattr__(self, "names", names)


def _name(spec: dict[str, Any]) -> str:
    function = spec.get("function")
    return str(function.get("name", "")) if isinstance(function, dict) else ""


def offered(supplied: SuppliedTurn | None, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools the model is offered: the persona's, and the caller's after them (a
    persona's tool the caller names too is the caller's)."""
    if supplied is None or not supplied.tools:
        return tools
    own = [spec for spec in tools if _name(spec) not in supplied.names]
    return [*own, *supplied.tools]


def sampling(persona: Persona, supplied: SuppliedTurn | None) -> dict[str, Any]:
    """The model call's ``temperature``, ``max_tokens`` and ``stop``: the persona's, the
    caller's temperature in its place, and the lower of the two token caps."""
    model = persona.model
    if supplied is None:
        return {"temperature": model.temperature, "max_tokens": model.max_tokens}
    caps = [cap for cap in (model.max_tokens, supplied.max_tokens) if cap is not None]
    return {
        "temperature": model.temperature if supplied.temperature is None else supplied.temperature,
        "max_tokens": min(caps) if caps else None,
        "stop": list(supplied.stop) or None,
    }


def handed_back(supplied: SuppliedTurn | None, end: StreamEnd) -> tuple[StreamEnd, list[ToolCall]]:
    """A model call's end, and the calls of the caller's tools it asked for. When it asked
    for any, the turn ends with them (the caller runs them and sends the results with its
    next request): the end then asks for no tool, and the hub's own tools asked for in the
    same breath are not run (the model asks again, once it has the caller's results)."""
    if supplied is None or not supplied.names or not end.tool_calls:
        return end, []
    handed = [call for call in end.tool_calls if call.name in supplied.names]
    if not handed:
        return end, []
    return replace(end, tool_calls=[]), handed
