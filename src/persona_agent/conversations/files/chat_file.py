"""A conversation as a file moves it: the neutral chat every format converts to and from
(docs/conversations.md, "Moving chats"), its bounds and checks, and the chat of a stored
conversation. The formats are beside it: the hub's own JSON file (:mod:`.json_chat`),
SillyTavern's (:mod:`.sillytavern`), a Markdown transcript (:mod:`.markdown_chat`).

:class:`ImportedChat` is what an import gives the conversation store and what an export
is written from: the selected branch's messages (OpenAI format, each with when it was
said) and, for each answer that has alternatives, the final text of every alternative.
An *answer* is what follows a user message up to the next one (the opening greeting is
the answer before the first user message); its alternatives are keyed by the index of its
first message. Everything here is pure: bytes in, a chat out, and back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from persona_agent.conversations.view import MAX_ALTERNATIVES, ConversationView
from persona_agent.errors import PersonaAgentError
from persona_agent.llm.base import Message

__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_FILE_BYTES",
    "MAX_MESSAGES",
    "Alternatives",
    "ChatFileError",
    "Entry",
    "ImportedChat",
    "answer_starts",
    "chat_of_view",
    "check_chat",
    "creation_of",
    "iso_of",
    "loads_json",
    "ms_of_iso",
]

MAX_FILE_BYTES = 5 * 1024 * 1024
"""The largest chat file an import reads (a long SillyTavern chat is ~1 MB)."""
MAX_MESSAGES = 10_000
"""The most messages (lines of a SillyTavern file) an imported chat may have."""
MAX_DEPTH = 64
"""Lists and objects nested in one another in a chat file, at most (a message needs 5)."""
MAX_MS = 253_402_300_800_000
"""The latest date a chat's message may have (the end of year 9999, in ms): later ones
could not be written out again."""


class ChatFileError(PersonaAgentError):
    """A chat file cannot be imported; the message names the line (or message) and the
    field, and nothing was stored (the REST API answers 422)."""

    message = "The chat file cannot be read"


@dataclass(frozen=True, slots=True)
class Entry:
    """One message of the selected branch and when it was said (ms since the epoch)."""

    message: Message
    at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Alternatives:
    """An answer's alternatives: the final text of each, ``selected`` the one shown (its
    messages are the chat's own), and when each was made."""

    selected: int
    texts: list[str]
    at_ms: list[int | None] = field(default_factory=list)

    def messages(self, position: int) -> list[Message]:
        """The chat messages of alternative ``position`` (an imported one: its text)."""
        return [{"role": "assistant", "content": self.texts[position]}]


@dataclass(frozen=True, slots=True)
class ImportedChat:
    """A conversation between formats: the selected branch and the alternatives of its
    answers, keyed by the index of the answer's first message."""

    messages: list[Entry]
    swipes: dict[int, Alternatives] = field(default_factory=dict)
    user_name: str | None = None
    character_name: str | None = None
    created_ms: int | None = None
    notes: list[str] = field(default_factory=list)
    """What the import left out, for the person who imported it (system messages...)."""


def answer_starts(messages: list[Entry]) -> list[int]:
    """The index of each answer's first message: the greeting's (0, when the chat opens
    with the persona) and each first message after a user message."""
    starts = []
    previous = "user"
    for index, entry in enumerate(messages):
        role = entry.message.get("role")
        if role != "user" and previous == "user":
            starts.append(index)
        previous = str(role)
    return starts


def iso_of(ms: int | None) -> str | None:
    """``ms`` since the epoch as ISO 8601 in UTC, with milliseconds (None stays None)."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def loads_json(text: str | bytes, where: str) -> Any:
    """The JSON value of ``text`` (``where`` in the file: for the message).

    Raises:
        ChatFileError: not JSON, nested deeper than :data:`MAX_DEPTH`, a value Python
            refuses (a number of more than 4300 digits), or a text with half a UTF-16
            surrogate pair (``"\\ud800"``: it could not be written out again).
    """
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ChatFileError(f"{where}: not JSON ({error})") from None
    except RecursionError:
        raise ChatFileError(_too_deep(where)) from None
    except ValueError as error:  # valid JSON that Python refuses: a 5000-digit number
        reason = str(error).split("; use sys.set_int_max_str_digits()")[0]
        raise ChatFileError(f"{where}: a value cannot be read ({reason})") from None
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:
                raise ChatFileError(f"{where}: a text has half a surrogate pair") from None
            continue
        if not isinstance(item, dict | list):
            continue
        children = [*item, *item.values()] if isinstance(item, dict) else item
        if depth >= MAX_DEPTH:
            raise ChatFileError(_too_deep(where))
        pending.extend((child, depth + 1) for child in children)
    return value


def _too_deep(where: str) -> str:
    return f"{where}: lists and objects are nested more than {MAX_DEPTH} deep"


def ms_of_iso(value: str) -> int | None:
    """An ISO 8601 date as ms since the epoch (UTC when it names no zone), or None."""
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return round(moment.timestamp() * 1000)
    except (OverflowError, ValueError):  # year 1 in a zone ahead of UTC
        return None


def check_chat(chat: ImportedChat) -> None:
    """What every imported chat must be: not empty, within the bounds, tool results right
    after their calls, alternatives only at the start of an answer.

    Raises:
        ChatFileError: the first message (by index) that breaks a rule, and the rule.
    """
    if not chat.messages:
        raise ChatFileError("The chat has no messages")
    if len(chat.messages) > MAX_MESSAGES:
        raise ChatFileError(f"The chat has more than {MAX_MESSAGES} messages")
    open_calls: set[str] = set()
    for index, entry in enumerate(chat.messages):
        message = entry.message
        if message["role"] == "tool":
            if message["tool_call_id"] not in open_calls:
                raise ChatFileError(
                    f"messages[{index}].tool_call_id: no call before it has this id"
                )
            open_calls.discard(message["tool_call_id"])
            continue
        open_calls = {call["id"] for call in message.get("tool_calls") or ()}
    starts = set(answer_starts(chat.messages))
    for index, alternatives in chat.swipes.items():
        if index not in starts:
            raise ChatFileError(
                f"messages[{index}].swipes: alternatives belong to an answer's first message"
            )
        if len(alternatives.texts) > MAX_ALTERNATIVES:
            raise ChatFileError(
                f"messages[{index}].swipes: more than {MAX_ALTERNATIVES} alternatives"
            )


# --- a stored conversation ------------------------------------------------------------


def chat_of_view(view: ConversationView) -> ImportedChat:
    """The chat of a stored conversation: its selected branch and, for each answer with
    alternatives, their final texts."""
    index_of = {message.id: index for index, message in enumerate(view.messages)}
    swipes: dict[int, Alternatives] = {}
    for answer in view.answers:
        if answer.first_message is None or answer.selected < 0:
            continue
        swipes[index_of[answer.first_message]] = Alternatives(
            answer.selected, list(answer.texts), [None] * answer.count
        )
    messages = [Entry(message.message, message.at_ms) for message in view.messages]
    return ImportedChat(messages, swipes)


def creation_of(
    chat: ImportedChat,
) -> tuple[list[Message], dict[int, list[list[Message] | None]]]:
    """What :meth:`~persona_agent.conversations.conversation_store.ConversationStore.create`
    takes to store a chat: its messages (each with its ``at_ms``), and each answer's
    alternatives by its first message (``None`` at the selected one)."""
    messages = [
        entry.message if entry.at_ms is None else {**entry.message, "at_ms": entry.at_ms}
        for entry in chat.messages
    ]
    swipes: dict[int, list[list[Message] | None]] = {
        start: [
            None if position == alternatives.selected else alternatives.messages(position)
            for position in range(len(alternatives.texts))
        ]
        for start, alternatives in chat.swipes.items()
    }
    return messages, swipes
