"""A stored conversation as it reads: its selected branch, message by message with ids, and
the alternatives of each answer that has more than one (``pa_messages``, ``pa_swipes``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from persona_agent.llm.base import Message

__all__ = [
    "MAX_ALTERNATIVES",
    "Alternatives",
    "ConversationInfo",
    "ConversationView",
    "StoredMessage",
    "SwipeRow",
    "answer_spans",
    "final_text",
    "message_group",
    "message_parts",
    "newest_alternatives",
]

T = TypeVar("T")

MAX_ALTERNATIVES = 100
"""The most alternatives one answer keeps, however they came (an import, a fork, a
regeneration): past it the oldest that is not the selected one goes."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message of the selected branch: its id (``pa_messages.seq``), the chat message,
    and when it was stored (ms since the epoch; none before migration 0010)."""

    id: int
    message: Message
    at_ms: int | None

    @property
    def role(self) -> str:
        return str(self.message.get("role", ""))


@dataclass(frozen=True, slots=True)
class SwipeRow:
    """One alternative of an answer (``pa_swipes``): ``messages`` none for the selected one."""

    anchor: int
    position: int
    messages: list[Message] | None
    at_ms: int


@dataclass(frozen=True, slots=True)
class Alternatives:
    """The alternatives of the answer to the user message ``anchor`` (0: the greeting)."""

    anchor: int
    selected: int
    """The selected one's position (-1: none, a regeneration under way)."""
    count: int
    texts: tuple[str, ...]
    """Each alternative's final text, in position order."""
    first_message: int | None
    """The id of the selected answer's first message (none: the answer is empty)."""


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """A conversation in a list: whose, how long, when last changed, how it ends."""

    persona_id: str
    context_id: str
    key: str
    messages: int
    updated_ms: int | None
    preview: str


@dataclass(frozen=True, slots=True)
class ConversationView:
    """A conversation: its selected branch, and the alternatives of its answers."""

    key: str
    messages: tuple[StoredMessage, ...]
    answers: tuple[Alternatives, ...]

    def alternatives_at(self, message_id: int) -> Alternatives | None:
        """The alternatives of the answer whose first message is ``message_id``."""
        for answer in self.answers:
            if answer.first_message == message_id:
                return answer
        return None

    @classmethod
    def of(
        cls, key: str, rows: Sequence[StoredMessage], swipes: Sequence[SwipeRow]
    ) -> ConversationView:
        spans = answer_spans(rows)
        by_anchor: dict[int, list[SwipeRow]] = {}
        for swipe in swipes:
            by_anchor.setdefault(swipe.anchor, []).append(swipe)
        answers: list[Alternatives] = []
        for anchor, alternatives in sorted(by_anchor.items()):
            span = spans.get(anchor, [])
            texts: list[str] = []
            selected = -1
            for index, swipe in enumerate(sorted(alternatives, key=lambda s: s.position)):
                if swipe.messages is None:
                    selected = index
                    texts.append(final_text([rows[i].message for i in span]))
                else:
                    texts.append(final_text(swipe.messages))
            first = rows[span[0]].id if span else None
            answers.append(Alternatives(anchor, selected, len(texts), tuple(texts), first))
        return cls(key, tuple(rows), tuple(answers))


def newest_alternatives(alternatives: Sequence[T], selected: Callable[[T], bool]) -> list[T]:
    """``alternatives`` (in position order, the newest last) within :data:`MAX_ALTERNATIVES`:
    the selected one and the newest of the others."""
    if len(alternatives) <= MAX_ALTERNATIVES:
        return list(alternatives)
    others = [index for index, item in enumerate(alternatives) if not selected(item)]
    dropped = set(others[: len(alternatives) - MAX_ALTERNATIVES])
    return [item for index, item in enumerate(alternatives) if index not in dropped]


def answer_spans(rows: Sequence[StoredMessage]) -> dict[int, list[int]]:
    """Each answer's messages (indexes in ``rows``) by anchor: the id of the user message
    it answers (0: the greeting, the messages before the first user message)."""
    spans: dict[int, list[int]] = {0: []}
    anchor = 0
    for index, row in enumerate(rows):
        if row.role == "user":
            anchor = row.id
            spans[anchor] = []
        else:
            spans[anchor].append(index)
    return spans


def message_group(rows: Sequence[StoredMessage], index: int) -> set[int]:
    """The ids that go with the message at ``index``: a tool call with its results."""
    row = rows[index]
    if row.role == "tool":  # a result goes with its call (and the call's other results)
        call_id = row.message.get("tool_call_id")
        for earlier in reversed(rows[:index]):
            ids = [c.get("id") for c in earlier.message.get("tool_calls") or ()]
            if call_id in ids:
                return message_group(rows, rows.index(earlier))
        return {row.id}
    calls = {c.get("id") for c in row.message.get("tool_calls") or ()}
    gone = {row.id}
    for later in rows[index + 1 :]:
        if later.role == "tool" and later.message.get("tool_call_id") in calls:
            gone.add(later.id)
        elif later.role != "tool":
            break
    return gone


def final_text(messages: Sequence[Message]) -> str:
    """An answer's final text: its last assistant message's text."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content:
            return content
    return ""


def loads(text: str | None) -> list[Message] | None:
    """An alternative's messages, stored as JSON (none: the selected one)."""
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, list) else []


def message_parts(message: Message, persona_id: str, context_id: str) -> list[dict[str, Any]]:
    """A stored message as the parts it was made of (docs/media.md): its text, its images
    (each with the URL of the conversation's media route) and its documents."""
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if isinstance(content, str) and content:
        parts.append({"kind": "text", "text": content})
    base = f"/api/v1/conversations/{quote(persona_id, safe='')}/{quote(context_id, safe='')}"
    for entry in message.get("media") or ():
        parts.append(
            {
                "kind": "image",
                "mediaType": entry.get("mediaType"),
                "name": entry.get("name"),
                "width": entry.get("width"),
                "height": entry.get("height"),
                "url": f"{base}/media/{entry.get('sha256')}",
            }
        )
    for entry in message.get("files") or ():
        names = ("name", "mediaType", "bytes", "tokens", "shownTokens")
        parts.append({"kind": "file", **{name: entry.get(name) for name in names}})
    return parts
