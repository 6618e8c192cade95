"""The embedded model's prompt: the turn's assembly written as a transcript, for a small
base (not chat) model.

A base model continues text; it follows no instructions. So the persona is
shown rather than told. The transcript renders the turn's
:class:`~persona_agent.personas.turn_prompt.PromptSections` (the same assembly a chat
model reads as messages) in this order:

1. the persona's own system prompt (a card's), as a plain line;
2. who is speaking: name, description, personality, manner; the background; what the
   persona knows about; the scenario;
3. the example exchanges, as earlier turns of the conversation;
4. the conversation: the running summary of what has left its window first, as a line
   ``(Earlier in this conversation: …)``, then its greeting, with the lore entries it
   brought up as a note just before the newest message (close to the question, where a
   small model heeds it, and after everything that stays the same from turn to turn, so
   the model's cache of that start is reused), and after them what memory recalled for
   it and the passages of the persona's documents found for it; the post-history
   instructions in brackets; then the persona's name, for the model to go on from. A
   continuation ends instead with the persona's last answer (the instructions before it),
   so that the model goes on writing that answer rather than writing another.

What does not fit the context is shortened in this order (the newest message always
stays): the background; the oldest turns of the conversation; the example exchanges,
the last first; the knowledge, scenario, personality and the persona's own system
prompt; the lore entries, the last first; finally the description is cut short.
A request with no persona uses its system message as a plain description of an assistant.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from persona_agent.llm.base import message_text
from persona_agent.personas.model import Persona
from persona_agent.personas.turn_prompt import PromptSections, assemble_prompt_sync

__all__ = ["USER_LABEL", "build_prompt", "continued", "sections_of", "stop_strings"]

USER_LABEL = "User"
"""How the other speaker is labelled in the transcript."""

DEFAULT_NAME = "Assistant"
BACKGROUND_CHARS = 700
"""The background is cut to its sentences within this length: a small model gains
little from more, and every token is read before the first word of an answer."""
SHORT_DESCRIPTION_CHARS = 400
"""A description is cut to this length when nothing else is left to shorten."""
_TURN_CHARS = 1200  # a past turn longer than this (a chattier model's, a document) is cut
_ARTICLE = re.compile(r"(?:The|A|An) ")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sections_of(
    prompt: PromptSections | None, persona: Persona | None, messages: list[dict[str, Any]]
) -> PromptSections:
    """The sections to render: the request's assembly; without one, the persona's for the
    messages' conversation (its lore scanned here); with neither, an assistant that the
    first paragraph of the system messages describes."""
    if prompt is not None:
        return prompt
    if persona is not None:
        return assemble_prompt_sync(persona, [m for m in messages if m.get("role") != "system"])
    system = "\n\n".join(message_text(m) for m in messages if m.get("role") == "system")
    first = system.strip().split("\n\n", 1)[0]
    return PromptSections(
        name=DEFAULT_NAME,
        system=system,
        conversation=tuple(m for m in messages if m.get("role") != "system"),
        description=" ".join(first.split())[:600],
    )


@dataclass(frozen=True, slots=True)
class _Layout:
    """What goes into the transcript: the sections as they are shortened."""

    sections: PromptSections
    background: str
    turns: tuple[tuple[str, str], ...]
    examples: tuple[tuple[str, str], ...]
    lore: tuple[str, ...]
    details: bool = True
    """Knowledge, scenario, personality and the persona's own system prompt are in."""
    description: str = ""


def build_prompt(
    sections: PromptSections, *, count_tokens: Callable[[str], int], budget: int
) -> str:
    """The transcript of ``sections``, within ``budget`` tokens if it can be.

    The prompt ends with ``"\\n<Name>:"``; the model's continuation is the answer. What
    does not fit goes in the order of the module's docstring; the newest message always
    stays, so the result may still be over ``budget`` (the caller says so).
    """
    layout = _Layout(
        sections=sections,
        background=_first_sentences(_flat(sections.background), BACKGROUND_CHARS),
        turns=tuple(_turns(sections.conversation, sections.name)),
        examples=tuple((_flat(question), _flat(answer)) for question, answer in sections.examples),
        lore=tuple(_flat(text) for text in sections.lore if text.strip()),
        description=_flat(sections.description),
    )
    while True:
        prompt = _render(layout)
        if count_tokens(prompt) <= budget:
            return prompt
        shorter = _shorten(layout)
        if shorter is None:
            return prompt
        layout = shorter


def _shorten(layout: _Layout) -> _Layout | None:
    """``layout`` one step shorter, in the documented order; ``None``: nothing left."""
    if layout.background:
        return replace(layout, background="")
    if len(layout.turns) > 1:
        return replace(layout, turns=layout.turns[1:])
    if layout.examples:
        return replace(layout, examples=layout.examples[:-1])
    if layout.details:
        return replace(layout, details=False)
    if layout.lore:
        return replace(layout, lore=layout.lore[:-1])
    if len(layout.description) > SHORT_DESCRIPTION_CHARS:
        return replace(layout, description=layout.description[:SHORT_DESCRIPTION_CHARS] + "…")
    return None


def _render(layout: _Layout) -> str:
    sections = layout.sections
    name = sections.name
    paragraphs: list[str] = []
    if layout.details and sections.instructions:
        paragraphs.append(sections.instructions)
    paragraphs.append(_intro(layout))
    if layout.background:
        paragraphs.append(layout.background)
    if layout.details and (sections.knowledge or sections.scenario or sections.user_description):
        facts = []
        if sections.knowledge:
            facts.append(f"{name} knows about: {', '.join(sections.knowledge)}.")
        if sections.scenario:
            facts.append(f"Scenario: {_flat(sections.scenario)}")
        if sections.user_description:  # who the user said they are (docs/conversations-user.md)
            facts.append(f"{name} talks to {sections.user}: {_flat(sections.user_description)}")
        paragraphs.append(" ".join(facts))
    for question, answer in layout.examples:
        paragraphs.append(f"{USER_LABEL}: {question}\n{name}: {answer}")
    conversation: list[str] = []
    if sections.summary:  # within the summary's own token budget: not shortened here
        conversation.append(f"(Earlier in this conversation: {_flat(sections.summary)})")
    # A continuation ends with the persona's own answer, for the model to go on writing it.
    continuing = bool(layout.turns) and layout.turns[-1][0] == name
    for index, (speaker, text) in enumerate(layout.turns):
        if index == len(layout.turns) - 1:  # what this message brought up: after the cache
            if layout.lore:
                conversation.append(f"(Note: {' '.join(layout.lore)})")
            if sections.remembered:  # within memory's own token budget: not shortened here
                remembered = " ".join(map(_flat, sections.remembered))
                conversation.append(f"({name} remembers: {remembered})")
            if sections.passages:  # within the knowledge's own token budget, as memory's
                conversation.append(f"({name} reads: {' '.join(map(_flat, sections.passages))})")
            if continuing and sections.post_history:
                conversation.append(f"[{_flat(sections.post_history)}]")
        conversation.append(f"{speaker}: {text}")
        if speaker == name and index < len(layout.turns) - 1:
            conversation.append("")
    if not continuing:
        if sections.post_history:
            conversation.append(f"[{_flat(sections.post_history)}]")
        conversation.append(f"{name}:")
    paragraphs.append("\n".join(conversation))
    return "\n\n".join(paragraphs)


def continued(sections: PromptSections) -> str | None:
    """The answer a continuation goes on with: the persona's last turn, when the
    conversation ends with it (the transcript then ends with it, not with a new turn)."""
    said = [
        message
        for message in sections.conversation
        if message.get("role") in ("user", "assistant") and _flat(message_text(message))
    ]
    if said and said[-1].get("role") == "assistant":
        return message_text(said[-1])  # as it was said: its last character joins it on
    return None


def stop_strings(sections: PromptSections) -> list[str]:
    """Where the model's answer ends for certain: a line that opens another turn (the
    user's, under the transcript's label or the user's own name, or the persona's next),
    as character-chat tools stop a model before it writes the user's lines."""
    labels = dict.fromkeys([USER_LABEL, sections.user.strip(), sections.name.strip()])
    return [f"\n{label}:" for label in labels if label]


def _intro(layout: _Layout) -> str:
    """Who is speaking, in a sentence or three."""
    sections = layout.sections
    name = sections.name
    description = layout.description
    if name == DEFAULT_NAME and not sections.tone:
        intro = " ".join(["The following is a conversation with an assistant.", description])
    else:
        intro = f"The following is a conversation with {name}"
        if description.startswith(name):  # a card's "{{char}} is ...": a sentence of its own
            intro += f". {description}"
        elif description:
            if _ARTICLE.match(description):
                description = description[0].lower() + description[1:]
            intro += f", {description}"
    intro = intro.strip().rstrip(".") + "."
    if layout.details and sections.personality:
        intro += f" {_flat(sections.personality).rstrip('.')}."
    if sections.tone:
        intro += f" {name} speaks in the first person. Manner: {_flat(sections.tone).rstrip('.')}."
    return intro


def _turns(messages: Sequence[dict[str, Any]], name: str) -> list[tuple[str, str]]:
    """(speaker, text) for every user and assistant message with text, in order."""
    turns: list[tuple[str, str]] = []
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        text = _flat(message_text(message))
        if not text:
            continue  # an assistant message that only called tools
        turns.append((USER_LABEL if role == "user" else name, text))
    # A past turn is cut; the newest is whole (the documents it brings are within their
    # budget, at most half of what the prompt may take: docs/media.md#documents).
    return [
        (speaker, text[: _TURN_CHARS - 1].rstrip() + "…" if len(text) > _TURN_CHARS else text)
        for speaker, text in turns[:-1]
    ] + turns[-1:]


def _flat(text: str) -> str:
    """``text`` on one line, its runs of white space single spaces."""
    return " ".join(text.split())


def _first_sentences(text: str, limit: int) -> str:
    """The whole sentences of ``text`` that fit in ``limit`` characters (at least one,
    cut at ``limit`` when the first is longer)."""
    if len(text) <= limit:
        return text
    kept = ""
    for sentence in _SENTENCE.split(text):
        candidate = f"{kept} {sentence}".strip()
        if len(candidate) > limit:
            break
        kept = candidate
    return kept or text[: limit - 1].rstrip() + "…"
