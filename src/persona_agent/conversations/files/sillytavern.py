"""SillyTavern's chat files (JSONL), read into and written from :class:`ImportedChat`.

A SillyTavern chat file is one JSON object a line: a header ``{"user_name",
"character_name", "create_date", "chat_metadata"}``, then each message ``{"name",
"is_user", "is_system", "send_date", "mes", "swipes", "swipe_id", "swipe_info",
"extra"}``. The shown text of a message is ``mes``; ``swipes`` are its alternatives
(``swipes[swipe_id]`` is the shown one), the first message's swipes being the card's
greetings. What the conversion does (docs/conversations.md, "Moving chats"):

- A message of the persona opening an answer keeps its swipes as the answer's
  alternatives (``mes`` wins where it differs from ``swipes[swipe_id]``). Swipes of a user
  message, or of a persona message following another one, are left out (the hub keeps
  alternatives per answer), and the chat's ``notes`` say so.
- System messages (``is_system``: narrator lines, hidden messages) are left out, as
  SillyTavern leaves them out of the model's prompt; the notes count them.
- ``send_date`` is read in each of SillyTavern's forms (ms numbers, ISO 8601,
  ``June 19, 2023 2:20pm``, ``2024-6-5 @14h 56m 50s 682ms``), as UTC (the file does not
  say its zone); an unreadable date is no date. It is written as ISO 8601 (UTC, ms).
- Written out: the user's and the persona's messages; tool calls and their results are
  the hub's own and are not (a persona message that only called tools is left out).
"""

from __future__ import annotations

import calendar
import json
import re
from datetime import UTC, datetime
from typing import Any

from persona_agent.conversations.files.chat_file import (
    MAX_FILE_BYTES,
    MAX_MESSAGES,
    MAX_MS,
    Alternatives,
    ChatFileError,
    Entry,
    ImportedChat,
    answer_starts,
    check_chat,
    iso_of,
    loads_json,
    ms_of_iso,
)
from persona_agent.llm.base import message_text

__all__ = ["format_header_date", "from_sillytavern", "parse_date", "to_sillytavern"]

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
_MERIDIEM = re.compile(r"([A-Za-z]+)\.?\s+(\d{1,2}),\s*(\d{4})\s+(\d{1,2}):(\d{2})\s*(am|pm)", re.I)
_HUMANIZED = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})\s*@(\d{1,2})h\s*(\d{1,2})m\s*(\d{1,2})s(?:\s*(\d{1,3})ms)?"
)


def parse_date(value: object) -> int | None:
    """A SillyTavern ``send_date`` or ``create_date`` as ms since the epoch (UTC), or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value) if 0 <= value < MAX_MS else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return parse_date(int(text)) if len(text) <= 16 else None
    if (match := _MERIDIEM.search(text)) is not None:
        month_name, day, year, hour, minute, meridiem = match.groups()
        month = _MONTHS.get(month_name.lower())
        hour24 = int(hour) % 12 + (12 if meridiem.lower() == "pm" else 0)
        return _utc_ms(int(year), month, int(day), hour24, int(minute))
    if (match := _HUMANIZED.search(text)) is not None:
        *fields, millis = match.groups()
        ms = _utc_ms(*(int(value) for value in fields))
        return None if ms is None else ms + int(millis or 0)
    return ms_of_iso(text)


def _utc_ms(
    year: int, month: int | None, day: int, hour: int, minute: int, second: int = 0
) -> int | None:
    if month is None:
        return None
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    return round(moment.timestamp() * 1000)


def format_header_date(ms: int) -> str:
    """``ms`` as SillyTavern writes a chat's ``create_date`` (``2026-11-27@00h29m01s123ms``)."""
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d@%Hh%Mm%Ss") + f"{moment.microsecond // 1000:03d}ms"


# --- reading ---------------------------------------------------------------------------


def _lines(data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """Each non-blank line of the file as (its number, its object)."""
    if len(data) > MAX_FILE_BYTES:
        raise ChatFileError(f"The chat file is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ChatFileError(f"The chat file is not UTF-8 text: {error}") from None
    numbered = [(number, line) for number, line in enumerate(text.split("\n"), 1)]
    numbered = [(number, line) for number, line in numbered if line.strip()]
    if len(numbered) > MAX_MESSAGES + 1:
        raise ChatFileError(f"The chat file has more than {MAX_MESSAGES} messages")
    objects = []
    for number, line in numbered:
        value = loads_json(line, f"line {number}")
        if not isinstance(value, dict):
            raise ChatFileError(f"line {number}: must be a JSON object")
        objects.append((number, value))
    if not objects:
        raise ChatFileError("The chat file is empty")
    return objects


def _flat(value: object) -> object:
    """A Chub-style ``{"message": text}`` as its text (SillyTavern reads those too)."""
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return value["message"]
    return value


def _field(number: int, line: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = line.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ChatFileError(f'line {number}: "{key}" must be {_KIND[kind]}')
    return value


_KIND = {str: "text", bool: "true or false", int: "a whole number", list: "a list"}


def _header_text(number: int, header: dict[str, Any], key: str) -> str | None:
    value = header.get(key)
    if value is not None and not isinstance(value, str):
        raise ChatFileError(f'line {number}: "{key}" must be text')
    return value or None


def from_sillytavern(data: bytes) -> ImportedChat:
    """A chat from a SillyTavern chat file (JSONL): see the module's docstring for what is
    kept, what is left out and why.

    Raises:
        ChatFileError: not such a file: the line and the field that is wrong.
    """
    lines = _lines(data)
    number, first = lines[0]
    header: dict[str, Any] = {}
    if "mes" not in first:
        if not {"user_name", "character_name", "chat_metadata"} & first.keys():
            raise ChatFileError(
                f"line {number}: neither a chat header (user_name, character_name) "
                "nor a message (mes)"
            )
        header, lines = first, lines[1:]
    messages: list[Entry] = []
    swipes: dict[int, Alternatives] = {}
    notes: list[str] = []
    skipped = 0
    for number, line in lines:
        if _field(number, line, "is_system", bool, False):
            skipped += 1
            continue
        entry, alternatives = _message(number, line)
        opens_answer = entry.message["role"] == "assistant" and (
            not messages or messages[-1].message["role"] == "user"
        )
        if alternatives is not None and opens_answer:
            swipes[len(messages)] = alternatives
        elif alternatives is not None:
            notes.append(
                f"line {number}: the swipes of this message are left out (the hub keeps "
                "the alternatives of an answer's first persona message only)"
            )
        messages.append(entry)
    if skipped:
        notes.append(
            f"{skipped} system or hidden messages are left out (SillyTavern does not send "
            "them to the model either)"
        )
    if not messages:
        raise ChatFileError("The chat file has no user or character messages")
    chat = ImportedChat(
        messages,
        swipes,
        user_name=_header_text(1, header, "user_name"),
        character_name=_header_text(1, header, "character_name"),
        created_ms=parse_date(header.get("create_date")),
        notes=notes,
    )
    check_chat(chat)
    return chat


def _message(number: int, line: dict[str, Any]) -> tuple[Entry, Alternatives | None]:
    """One message line: its entry and, when it has more than one swipe, its alternatives."""
    text = _flat(line.get("mes"))
    if not isinstance(text, str):
        raise ChatFileError(f'line {number}: "mes" (the message\'s text) must be text')
    role = "user" if _field(number, line, "is_user", bool, False) else "assistant"
    at_ms = parse_date(line.get("send_date"))
    texts = [_flat(swipe) for swipe in _field(number, line, "swipes", list, [])]
    if not all(isinstance(swipe, str) for swipe in texts):
        raise ChatFileError(f'line {number}: "swipes" must be a list of texts')
    entry = Entry({"role": role, "content": text}, at_ms)
    if len(texts) < 2:
        return entry, None
    selected = _field(number, line, "swipe_id", int, None)
    if selected is None:
        if text not in texts:
            raise ChatFileError(f'line {number}: "swipe_id" missing, and "mes" is no swipe')
        selected = texts.index(text)
    if not 0 <= selected < len(texts):
        raise ChatFileError(
            f'line {number}: "swipe_id" {selected} is not one of the {len(texts)} swipes'
        )
    texts[selected] = text  # what SillyTavern shows is mes
    info = line.get("swipe_info")
    info = info if isinstance(info, list) else []
    dates = [
        parse_date(item.get("send_date")) if isinstance(item, dict) else None
        for item in info[: len(texts)]
    ]
    dates += [None] * (len(texts) - len(dates))
    dates[selected] = at_ms
    return entry, Alternatives(selected, [str(swipe) for swipe in texts], dates)


# --- writing ---------------------------------------------------------------------------


def to_sillytavern(chat: ImportedChat, *, user_name: str, character_name: str) -> bytes:
    """A SillyTavern chat file of the chat's user and persona messages, the alternatives of
    each answer as the swipes of its first persona message."""
    header: dict[str, Any] = {"user_name": user_name, "character_name": character_name}
    created = chat.created_ms if chat.created_ms is not None else _first_date(chat)
    if created is not None:
        header["create_date"] = format_header_date(created)
    header["chat_metadata"] = {}
    lines = [header]
    starts = set(answer_starts(chat.messages))
    pending: Alternatives | None = None
    for index, entry in enumerate(chat.messages):
        if index in starts:
            pending = chat.swipes.get(index)
        message = entry.message
        role = message.get("role")
        if role == "tool" or (role == "assistant" and message.get("tool_calls")):
            continue
        if role == "assistant" and message.get("content") is None:
            continue
        line = _line(entry, user_name if role == "user" else character_name)
        if role == "assistant" and pending is not None:
            _add_swipes(line, pending)
            pending = None
        lines.append(line)
    return "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode()


def _first_date(chat: ImportedChat) -> int | None:
    return next((entry.at_ms for entry in chat.messages if entry.at_ms is not None), None)


def _line(entry: Entry, name: str) -> dict[str, Any]:
    line: dict[str, Any] = {
        "name": name,
        "is_user": entry.message.get("role") == "user",
        "is_system": False,
        "send_date": iso_of(entry.at_ms) or "",
        "mes": message_text(entry.message, "\n"),
        "extra": {},
    }
    return line


def _add_swipes(line: dict[str, Any], alternatives: Alternatives) -> None:
    texts = list(alternatives.texts)
    texts[alternatives.selected] = line["mes"]
    dates = list(alternatives.at_ms) + [None] * (len(texts) - len(alternatives.at_ms))
    line["swipe_id"] = alternatives.selected
    line["swipes"] = texts
    line["swipe_info"] = [
        {"send_date": iso_of(ms) or "", "extra": {}} for ms in dates[: len(texts)]
    ]
