"""The embedded model's prompt: a plain transcript, for a small base (not chat) model.

A base model continues text; it follows no instructions. So the persona is
shown rather than told: a line that says who is speaking, the persona's
interaction samples as earlier turns of the conversation, the real history,
then the new question and the persona's name, for the model to go on from.

The chat engine sends the persona's system prompt as rendered by
:func:`persona_agent.personas.prompt.render_system_prompt`; the parts used here
(name, description, tone, sample phrases, example exchanges) are read back from
it. Any other system prompt is used as a plain description.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["USER_LABEL", "PersonaSketch", "build_prompt", "sketch_from_system_prompt"]

USER_LABEL = "User"
"""How the other speaker is labelled in the transcript."""

_DEFAULT_NAME = "Assistant"
_YOU_ARE = re.compile(r"^You are (?P<name>.+?)\. Speak as ")
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


def sketch_from_system_prompt(text: str) -> PersonaSketch:
    """The persona's parts, read back from its rendered system prompt.

    A system prompt not rendered by persona_agent gives a sketch named
    "Assistant" whose description is the prompt's first paragraph.
    """
    lines = text.strip().splitlines()
    match = _YOU_ARE.match(lines[0]) if lines else None
    if match is None:
        first = text.strip().split("\n\n", 1)[0]
        return PersonaSketch(name=_DEFAULT_NAME, description=" ".join(first.split())[:600])
    name = match["name"].strip()
    sections = _sections(lines[1:])
    who = [line for line in sections.get("Who you are", []) if not line.startswith("Name: ")]
    speech = sections.get("How you speak", [])
    tone = next((line[len("Tone: ") :] for line in speech if line.startswith("Tone: ")), "")
    phrases: list[str] = []
    if "Phrases you might use:" in speech:
        start = speech.index("Phrases you might use:") + 1
        for line in speech[start:]:
            if not line.startswith("- "):
                break
            phrases.append(line[2:].strip())
    return PersonaSketch(
        name=name,
        description=" ".join(" ".join(who).split()),
        tone=tone.strip(),
        phrases=tuple(phrases),
        samples=tuple(_samples(sections.get("Example exchanges", []), name)),
    )


def build_prompt(
    messages: list[dict[str, Any]],
    *,
    count_tokens: Callable[[str], int],
    budget: int,
) -> tuple[str, PersonaSketch]:
    """The transcript for ``messages`` (OpenAI format) and the persona it speaks as.

    The prompt ends with ``"\\n<Name>:"``; the model's continuation is the answer.
    When the whole does not fit in ``budget`` tokens, the oldest turns of the
    history go first, then the example exchanges; the newest message always stays.
    """
    system = "\n\n".join(
        _content(message) for message in messages if message.get("role") == "system"
    )
    sketch = sketch_from_system_prompt(system)
    turns = _turns(messages, sketch.name)
    samples = list(sketch.samples)
    while True:
        prompt = _render(sketch, samples, turns)
        if count_tokens(prompt) <= budget or (len(turns) <= 1 and not samples):
            return prompt, sketch
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


def _sections(lines: list[str]) -> dict[str, list[str]]:
    """The ``# Title`` sections of a rendered system prompt, blank lines dropped."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line.startswith("# "):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None and line.strip():
            current.append(line.rstrip())
    return sections


def _samples(lines: list[str], name: str) -> list[tuple[str, str]]:
    """The example exchanges: ``User: ...`` then ``<Name>: ...`` (continued on later lines)."""
    samples: list[tuple[str, str]] = []
    question: str | None = None
    answer: list[str] | None = None
    user, persona = f"{USER_LABEL}: ", f"{name}: "
    for line in lines:
        if line.startswith(user):
            if question is not None and answer:
                samples.append((question, " ".join(answer)))
            question, answer = line[len(user) :].strip(), None
        elif line.startswith(persona) and question is not None:
            answer = [line[len(persona) :].strip()]
        elif answer is not None:
            answer.append(line.strip())
    if question is not None and answer:
        samples.append((question, " ".join(answer)))
    return samples
