"""Interaction samples read as turns: who speaks in a written conversation, and what.

Shared by the system prompt, the embedded model's transcript and the bounds a persona is
checked against at load (each turn repeats a speaker's name).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from persona_agent.personas.model import InteractionSample

__all__ = ["conversation_turns", "is_conversation"]

_SPEAKER = re.compile(r"^\s*([^:\n]{1,60}?)\s*:\s?(.*)$")
_START = re.compile(r"^\s*<start>\s*$", re.IGNORECASE)


def conversation_turns(content: str, name: str) -> list[tuple[Literal["user", "persona"], str]]:
    """The turns of a written conversation: lines ``Q:``/``A:``, ``User:``/``<name>:``,
    ``{{user}}:``/``{{char}}:`` start a turn, other lines continue it; ``<START>`` lines
    separate conversations. Text before any speaker is the persona's."""
    # Each turn's lines are gathered and joined once: adding a line to the text so far
    # would copy it again for every line (a sample of 100,000 lines: quadratic).
    turns: list[tuple[Literal["user", "persona"], list[str]]] = []
    own_name = name.strip().lower()
    for line in content.splitlines():
        if _START.match(line):
            continue
        match = _SPEAKER.match(line)
        speaker = _speaker(match.group(1), own_name) if match else None
        if match and speaker is not None:
            turns.append((speaker, [match.group(2).strip()]))
        elif turns:
            turns[-1][1].append(line.strip())
        elif line.strip():
            turns.append(("persona", [line.strip()]))
    joined = [(speaker, "\n".join(line for line in lines if line)) for speaker, lines in turns]
    return [(speaker, text) for speaker, text in joined if text]


_USER_LABELS = frozenset({"q", "user", "{{user}}", "<user>"})
_PERSONA_LABELS = frozenset({"a", "{{char}}", "<bot>", "<char>"})


def _speaker(label: str, own_name: str) -> Literal["user", "persona"] | None:
    key = re.sub(r"\s+", "", label).lower()
    if key in _USER_LABELS:
        return "user"
    if key in _PERSONA_LABELS or label.strip().lower() == own_name:
        return "persona"
    return None


def is_conversation(sample: InteractionSample) -> bool:
    """Whether the sample is a written conversation (its ``type`` says so, or it has none)."""
    return (sample.type or "conversation").strip().lower() in {"conversation", "dialogue", "chat"}
