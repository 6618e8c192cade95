"""What reached the model, by section: the record of one turn's prompt (issue 50).

Made from the turn's one assembly (:class:`~persona_agent.personas.turn_prompt.PromptSections`,
the same object the backend renders), never by assembling again: the system prompt's
frame, the card's fields, the example exchanges, the lore entries that fired and the keys
that fired them, the running summary, what memory recalled, the documents' passages, the
conversation's turns (images and documents as placeholders) and the post-history
instructions, each with its tokens (estimated: characters / 4, the hub's rule where no
tokenizer fits every model) and what was cut to fit (lore over the book's budget, what
memory recalled and the documents' passages over theirs, messages older than the
history's window). A text longer than :data:`MAX_ITEM_CHARS` is kept
clipped (its tokens are the whole text's), so that a record stays small.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from persona_agent.knowledge.turn import Passage
from persona_agent.llm.base import Message, Usage
from persona_agent.personas.formats.lorebook import FiredLore, estimate_tokens
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import render_frame
from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["MAX_ITEM_CHARS", "PromptRecord", "record_of"]

_CUT_NOTE = re.compile(r"is cut here: ([\d,]+) of its ([\d,]+) tokens shown")
"""A document's note when it was cut (:func:`persona_agent.knowledge.sent_documents`)."""

MAX_ITEM_CHARS = 4000
"""The most characters of one item's text a record keeps (its tokens count the whole)."""

SECTION_TITLES = {
    "system": "System prompt",
    "card": "Card fields",
    "examples": "Example exchanges",
    "lore": "Lore entries that fired",
    "summary": "Running summary",
    "memory": "Memory recalled",
    "knowledge": "Knowledge passages",
    "conversation": "Conversation turns",
    "post_history": "Post-history instructions",
}
"""Each section's name and title, in the order a record lists them."""


@dataclass(slots=True)
class PromptRecord:
    """One turn's prompt by section; :meth:`as_json` is what is stored and served."""

    persona: str
    model: str
    mode: str
    sections: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cut: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    messages: int = 0
    """How many messages the model was sent (the system prompt and the conversation's)."""

    def add(
        self, section: str, label: str, text: str, *, sent: str | None = None, **more: Any
    ) -> None:
        """An item of ``section``: its label, its text (clipped), its tokens (those of
        ``sent``, the text as sent, when the record shows it otherwise)."""
        tokens = estimate_tokens(text if sent is None else sent)
        item: dict[str, Any] = {"label": label, "tokens": tokens, **more}
        item.update(_clipped(text))
        self.sections.setdefault(section, []).append(item)

    def left_out(self, section: str, label: str, text: str, reason: str) -> None:
        """What a budget cut from ``section``: its label, its text (clipped), its tokens,
        why."""
        item = {"label": label, "tokens": estimate_tokens(text), "reason": reason}
        item.update(_clipped(text))
        self.cut.setdefault(section, []).append(item)

    def as_json(self, usage: Usage, calls: int) -> dict[str, Any]:
        """The record, with what the model said it read (``usage``, of ``calls`` calls)."""
        sections = []
        for name, title in SECTION_TITLES.items():
            items, cut = self.sections.get(name, []), self.cut.get(name, [])
            if not items and not cut:
                continue
            tokens = sum(item["tokens"] for item in items)
            sections.append(
                {"name": name, "title": title, "tokens": tokens, "items": items, "cut": cut}
            )
        return {
            "persona": self.persona,
            "model": self.model,
            "mode": self.mode,
            "tokens": sum(section["tokens"] for section in sections),
            "tokensEstimated": "characters / 4",
            "messages": self.messages,
            "modelCalls": calls,
            "promptTokens": usage.prompt_tokens,
            "sections": sections,
        }


def record_of(
    persona: Persona,
    prompt: PromptSections,
    *,
    model: str,
    mode: str,
    window: int,
    window_cut: bool,
    sent: Sequence[Message],
    memory_left_out: Sequence[tuple[str, str]] = (),
    knowledge_left_out: Sequence[tuple[Passage, str]] = (),
) -> PromptRecord:
    """The record of ``prompt`` (sent to ``model`` for a turn of ``mode`` as the messages
    ``sent``: ``prompt.messages()``); ``window``: the most messages the history shows,
    ``window_cut``: older ones were left out; ``memory_left_out`` and
    ``knowledge_left_out``: what memory and the documents found that their budgets left
    out (each with why)."""
    record = PromptRecord(persona.id, model, mode, messages=len(sent))
    opening, rules = render_frame(persona, prompt.user)
    record.add("system", "Opening", opening)
    _card(record, prompt)
    for number, (question, answer) in enumerate(prompt.examples, 1):
        record.add(
            "examples", f"Example {number}", f"{prompt.user}: {question}\n{prompt.name}: {answer}"
        )
    record.add("system", "Rules", rules)
    for entry in prompt.lore_fired:
        record.add("lore", entry.title, entry.text, **_why(entry))
    if prompt.lore_cut:
        record.cut["lore"] = [
            {
                **_why(entry),
                "label": entry.title,
                "tokens": entry.tokens,
                "reason": "over the book's token budget",
            }
            for entry in prompt.lore_cut
        ]
    if prompt.summary:
        record.add("summary", "Summary", prompt.summary)
    for number, item in enumerate(prompt.remembered, 1):
        record.add("memory", f"Memory {number}", item)
    for number, passage in enumerate(prompt.passages, 1):
        record.add("knowledge", f"[{number}]", passage)
    for text, reason in memory_left_out:
        record.left_out("memory", "Memory", text, reason)
    for found, reason in knowledge_left_out:
        record.left_out("knowledge", found.where(), found.text, reason)
    _framing(record, sent)
    _conversation(record, prompt)
    if window_cut:
        reason = f"older than the window of the last {window} messages"
        if prompt.summary:
            reason += " (the running summary stands for them)"
        record.cut["conversation"] = [{"label": "Earlier messages", "reason": reason}]
    if prompt.post_history:
        record.add("post_history", "Instructions", prompt.post_history)
    return record


def _framing(record: PromptRecord, sent: Sequence[Message]) -> None:
    """What the system message has besides its sections' texts (headings, separators, the
    fields listed under no section, as a language style's characteristics and other keys):
    counted, so that the sections' tokens add up to the system message's."""
    content = sent[0].get("content") if sent else None
    if not isinstance(content, str):
        return
    inside = ("system", "card", "examples", "lore", "summary", "memory", "knowledge")
    counted = sum(item["tokens"] for name in inside for item in record.sections.get(name, []))
    rest = estimate_tokens(content) - counted
    if rest > 0:
        record.sections["system"].append(
            {"label": "Headings, separators, other fields", "tokens": rest, "text": ""}
        )


def _card(record: PromptRecord, prompt: PromptSections) -> None:
    """The card's fields as the system prompt has them."""
    speech = "\n".join(
        [f"Tone: {prompt.tone}"] * bool(prompt.tone) + [f"- {phrase}" for phrase in prompt.phrases]
    )
    fields = (
        ("Description", prompt.description),
        ("Personality", prompt.personality),
        ("Background", prompt.background),
        ("How they speak", speech),
        ("Knowledge", ", ".join(prompt.knowledge)),
        ("Scenario", prompt.scenario),
        (f"{prompt.user}'s persona", prompt.user_description),
    )
    for label, text in fields:
        if text:
            record.add("card", label, text)


def _conversation(record: PromptRecord, prompt: PromptSections) -> None:
    """Each message of the conversation, its images and documents as placeholders."""
    for message in prompt.conversation:
        role = str(message.get("role", ""))
        label = {"user": prompt.user, "assistant": prompt.name}.get(role, role)
        text = _text(message)
        shown = text
        for document in _dicts(message.get("files")):
            shown, cut = _placeholder(shown, str(document.get("name", "")))
            if cut:
                record.cut.setdefault("conversation", []).append(cut)
        attached = _attached(message)
        record.add("conversation", label, shown, sent=text, role=role, attached=attached)


def _placeholder(text: str, name: str) -> tuple[str, dict[str, Any] | None]:
    """``text`` with the document ``name`` as read into it (docs/media.md#documents:
    ``[document: NAME]``, its text, ``[end of NAME]`` or ``[NAME is cut here: ...]``) shown as
    a placeholder with its tokens; and, when it was cut to the document budget, why."""
    start = text.find(f"[document: {name}]\n")
    if not name or start < 0:
        return text, None
    ends = [text.find(mark, start) for mark in (f"\n[end of {name}]", f"\n[{name} is cut here:")]
    found = [at for at in ends if at >= 0]
    close = text.find("]", min(found) + 2) if found else -1
    if close < 0:
        return text, None
    frame = text[start : close + 1]
    note = _CUT_NOTE.search(frame)
    placeholder = f"[document: {name}, ~{estimate_tokens(frame)} tokens]"
    cut = None
    if note is not None and min(found) == ends[1]:  # the note ends the frame: it was cut
        cut = {
            "label": f"Document {name}",
            "reason": f"{note.group(1)} of its {note.group(2)} tokens shown (the document budget)",
        }
    return text[:start] + placeholder + text[close + 1 :], cut


def _text(message: Message) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    calls = [call.get("function", {}).get("name", "") for call in message.get("tool_calls") or ()]
    if calls:
        text += ("\n" if text else "") + "".join(f"[calls {name}]" for name in calls)
    return text


def _attached(message: Message) -> list[str]:
    """Placeholders for the images a message brought (its documents' are in its text)."""
    images = [
        f"[image: {image.get('name') or 'unnamed'} ({image.get('mediaType', 'image')})]"
        for image in _dicts(message.get("media"))
    ]
    return images


def _dicts(value: Any) -> Sequence[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _why(entry: FiredLore) -> dict[str, Any]:
    return {"keys": list(entry.keys), "constant": entry.constant, "position": entry.position}


def _clipped(text: str) -> dict[str, Any]:
    if len(text) <= MAX_ITEM_CHARS:
        return {"text": text}
    return {"text": text[:MAX_ITEM_CHARS], "clipped": len(text) - MAX_ITEM_CHARS}
