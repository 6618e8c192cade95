"""The embedded model's prompt: a plain transcript, for a small base (not chat) model.

A base model continues text; it follows no instructions. So the persona is
shown rather than told: a line that says who is speaking, the persona's
interaction samples as earlier turns of the conversation, the real history,
then the new question and the persona's name, for the model to go on from.

The chat request carries the persona: the parts used here (name, description,
tone, sample phrases, example exchanges) come from it. A request with no persona
uses its system message as a plain description of an assistant.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import sample_exchanges

__all__ = ["USER_LABEL", "PersonaSketch", "build_prompt", "sketch_of"]

USER_LABEL = "User"
"""How the other speaker is labelled in the transcript."""

_DEFAULT_NAME = "Assistant"
_TURN_CHARS = 1200  # a past turn longer than this (from a chattier model) is cut
_ARTICLE = re.compile(r"(?:The|A|An) ")


@dataclass(frozen=True, slots=True)
class PersonaSketch:
    """What the transcript needs of a persona."""

    name: str
    description: str = ""
    tone: str = ""
    phrases: tuple[str, ...] = ()
    samples: tuple[tuple[str, str], ...] = ()
    """Example exchanges: (question, answer)."""


def sketch_of(persona: Persona | None, messages: list[dict[str, Any]]) -> PersonaSketch:
    """What the transcript needs of ``persona``; with none, an assistant that the first
    paragraph of the system messages describes."""
    if persona is None:
        system = "\n\n".join(_content(m) for m in messages if m.get("role") == "system")
        first = system.strip().split("\n\n", 1)[0]
        return PersonaSketch(name=_DEFAULT_NAME, description=" ".join(first.split())[:600])
    style = persona.language_style
    exchanges = sample_exchanges(persona)
    return PersonaSketch(
        name=persona.name.strip(),
        description=" ".join(persona.description.split()),
        tone=style.tone.strip() if style is not None else "",
        phrases=tuple(phrase.strip() for phrase in style.sample_phrases) if style else (),
        samples=tuple(
            (" ".join(question.split()), " ".join(answer.split()))
            for question, answer in exchanges
            if question  # a quote answers nothing: no turn of a transcript
        ),
    )


def build_prompt(
    messages: list[dict[str, Any]],
    sketch: PersonaSketch,
    *,
    count_tokens: Callable[[str], int],
    budget: int,
) -> str:
    """The transcript for ``messages`` (OpenAI format), spoken as ``sketch``.

    The prompt ends with ``"\\n<Name>:"``; the model's continuation is the answer.
    When the whole does not fit in ``budget`` tokens, the oldest turns of the
    history go first, then the example exchanges; the newest message always stays.
    """
    turns = _turns(messages, sketch.name)
    samples = list(sketch.samples)
    while True:
        prompt = _render(sketch, samples, turns)
        if count_tokens(prompt) <= budget or (len(turns) <= 1 and not samples):
            return prompt
        if len(turns) > 1:
            turns = turns[1:]
        else:
            samples = samples[:-1]


def _render(
    sketch: PersonaSketch, samples: list[tuple[str, str]], turns: list[tuple[str, str]]
) -> str:
    name = sketch.name
    description = sketch.description.strip()
    if name == _DEFAULT_NAME:
        intro = " ".join(["The following is a conversation with an assistant.", description])
    else:
        intro = f"The following is a conversation with {name}"
        if description:
            if _ARTICLE.match(description):
                description = description[0].lower() + description[1:]
            intro += f", {description}"
    intro = intro.strip().rstrip(".") + "."
    if sketch.tone:
        intro += f" {name} speaks in the first person. Manner: {sketch.tone.rstrip('.')}."
    lines: list[str] = []
    for question, answer in samples:
        lines += [f"{USER_LABEL}: {question}", f"{name}: {answer}", ""]
    for speaker, text in turns:
        lines.append(f"{speaker}: {text}")
        if speaker == name:
            lines.append("")
    if lines and lines[-1] == "":
        lines.pop()
    return intro + "\n\n" + "\n".join(lines) + f"\n{name}:"


def _turns(messages: list[dict[str, Any]], name: str) -> list[tuple[str, str]]:
    """(speaker, text) for every user and assistant message with text, in order."""
    turns: list[tuple[str, str]] = []
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        text = " ".join(_content(message).split())
        if not text:
            continue  # an assistant message that only called tools
        if len(text) > _TURN_CHARS:
            text = text[: _TURN_CHARS - 1].rstrip() + "…"
        turns.append((USER_LABEL if role == "user" else name, text))
    return turns


def _content(message: dict[str, Any]) -> str:
    """The text of a message, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""
