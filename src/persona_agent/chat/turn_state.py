"""What one turn of the chat engine holds while it runs: the prompt as it grows, what the
turn says, and what its calls used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from persona_agent.chat.budget import TurnCalls
from persona_agent.chat.prompt_record import PromptRecord
from persona_agent.chat.tools import ToolQuestion, Turn
from persona_agent.chat.turn_modes import Opening
from persona_agent.llm.base import Message, StreamEnd, ToolCall, Usage
from persona_agent.memory.scope import MemoryScope
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["TurnState"]


@dataclass(slots=True)
class TurnState:
    """One turn in progress: what the model is shown, what the turn says (for the
    history), and what its calls used."""

    persona: Persona
    key: str
    """The conversation's key in the history and the locks (persona and context)."""
    user_message: str
    turn: Turn
    calls: TurnCalls
    model: str
    prompt: PromptSections
    """The turn's prompt as assembled once, for every backend to render."""
    record: PromptRecord
    """What the prompt holds, by section, for the user to see (stored with the answer)."""
    messages: list[Message]
    """What the model is shown: the prompt, then each call's text and tool results."""
    said: list[Message]
    """What the turn adds to the history when it completes."""
    tools: list[dict[str, Any]]
    started: float
    answering: tuple[str, str] | None
    """The tool waiting for the user's answer, and the argument it goes in."""
    usage: Usage = field(default_factory=Usage)
    answer: list[str] = field(default_factory=list)
    """The text of every call, the answer when the turn ends."""
    llm_calls: int = 0
    tool_calls: int = 0
    asked: ToolQuestion | None = None
    """The question a tool asked the user in this turn (one a turn)."""
    end: StreamEnd = field(default_factory=StreamEnd)
    """How the last call ended (its tool calls, usage)."""
    text: str = ""
    """The last call's text."""
    memory_scope: MemoryScope | None = None
    """Whose memory the turn reads and adds to (``None``: the persona remembers nothing)."""
    new_conversation: bool = False
    """Whether the turn opens its conversation (no history before it)."""
    remembered: tuple[str, ...] = ()
    """What memory brought into the prompt, each item marked with who said it."""
    opening: Opening | None = None
    """How the turn opened (its mode's start: a regeneration's stashed answer...)."""
    handed: list[ToolCall] = field(default_factory=list)
    """The caller's tools the last call asked for, handed back to it (:mod:`.supplied`)."""
    citations: tuple[dict[str, Any], ...] = ()
    """Where each passage of the persona's documents in the prompt is, numbered as there."""
