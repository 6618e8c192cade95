"""The hub's own JSON chat file: every message of a conversation's selected branch (tool
calls and results included) and each answer's alternatives, written and read back
(docs/conversations.md, "Moving chats")."""

from __future__ import annotations

import json
from typing import Any

from persona_agent.conversations.files.chat_file import (
    MAX_FILE_BYTES,
    MAX_MESSAGES,
    Alternatives,
    ChatFileError,
    Entry,
    ImportedChat,
    check_chat,
    iso_of,
    loads_json,
    ms_of_iso,
)
from persona_agent.llm.base import Message

__all__ = ["FORMAT", "from_json", "to_json"]

FORMAT = "persona-agent.conversation.v1"
"""The ``format`` field of the hub's JSON chat file."""

_ROLES = ("user", "assistant", "tool")


def to_json(chat: ImportedChat, *, persona_id: str, context_id: str) -> bytes:
    """The hub's JSON chat file: every message of the selected branch (tool calls and
    results included) and each answer's alternatives; :func:`from_json` reads it back."""
    messages: list[dict[str, Any]] = []
    for index, entry in enumerate(chat.messages):
        item: dict[str, Any] = {
            key: entry.message[key]
            for key in ("role", "content", "tool_calls", "tool_call_id")
            if entry.message.get(key) is not None
        }
        item["at"] = iso_of(entry.at_ms)
        alternatives = chat.swipes.get(index)
        if alternatives is not None:
            item["swipes"] = {
                "selected": alternatives.selected,
                "texts": alternatives.texts,
                "at": [iso_of(ms) for ms in alternatives.at_ms],
            }
        messages.append(item)
    document = {
        "format": FORMAT,
        "persona_id": persona_id,
        "context_id": context_id,
        "user_name": chat.user_name,
        "character_name": chat.character_name,
        "created": iso_of(chat.created_ms),
        "messages": messages,
    }
    return json.dumps(document, ensure_ascii=False, indent=1).encode()


def from_json(data: bytes) -> ImportedChat:
    """A chat from the hub's JSON file (:func:`to_json`).

    Raises:
        ChatFileError: not that file, or a message that is not valid (named by its index).
    """
    if len(data) > MAX_FILE_BYTES:
        raise ChatFileError(f"The chat file is larger than {MAX_FILE_BYTES} bytes")
    document = loads_json(data, "The chat file")
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ChatFileError(f'The chat file is not a persona-agent chat ("format": "{FORMAT}")')
    items = document.get("messages")
    if not isinstance(items, list):
        raise ChatFileError('The chat file has no "messages" list')
    if len(items) > MAX_MESSAGES:
        raise ChatFileError(f"The chat file has more than {MAX_MESSAGES} messages")
    messages: list[Entry] = []
    swipes: dict[int, Alternatives] = {}
    for index, item in enumerate(items):
        messages.append(_json_entry(index, item))
        if isinstance(item, dict) and item.get("swipes") is not None:
            swipes[index] = _json_alternatives(index, item["swipes"], messages[-1])
    chat = ImportedChat(
        messages,
        swipes,
        user_name=_optional_text(document, "user_name"),
        character_name=_optional_text(document, "character_name"),
        created_ms=_json_date(document.get("created")),
    )
    check_chat(chat)
    return chat


def _optional_text(document: dict[str, Any], key: str) -> str | None:
    value = document.get(key)
    if value is not None and not isinstance(value, str):
        raise ChatFileError(f'"{key}": must be text')
    return value


def _json_date(value: object) -> int | None:
    return ms_of_iso(value) if isinstance(value, str) else None


def _json_entry(index: int, item: object) -> Entry:
    where = f"messages[{index}]"
    if not isinstance(item, dict):
        raise ChatFileError(f"{where}: must be an object")
    role = item.get("role")
    if role not in _ROLES:
        raise ChatFileError(f"{where}.role: must be one of {', '.join(_ROLES)}, not {role!r}")
    content = item.get("content")
    if content is not None and not isinstance(content, str):
        raise ChatFileError(f"{where}.content: must be text")
    message: Message = {"role": role, "content": content}
    calls = item.get("tool_calls")
    if calls is not None:
        if (
            role != "assistant"
            or not isinstance(calls, list)
            or not all(_is_tool_call(call) for call in calls)
        ):
            raise ChatFileError(
                f"{where}.tool_calls: an assistant's list of "
                '{"id", "type": "function", "function": {"name", "arguments"}}'
            )
        message["tool_calls"] = calls
    if role == "tool":
        call_id = item.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise ChatFileError(f"{where}.tool_call_id: a tool result names its call")
        message["tool_call_id"] = call_id
    elif content is None and calls is None:
        raise ChatFileError(f"{where}.content: missing")
    return Entry(message, _json_date(item.get("at")))


def _is_tool_call(call: object) -> bool:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return False
    function = call.get("function")
    return (
        isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and isinstance(function.get("arguments"), str)
    )


def _json_alternatives(index: int, value: object, entry: Entry) -> Alternatives:
    where = f"messages[{index}].swipes"
    if not isinstance(value, dict):
        raise ChatFileError(f'{where}: must be {{"selected", "texts"}}')
    texts = value.get("texts")
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise ChatFileError(f"{where}.texts: must be a list of texts")
    selected = value.get("selected")
    if not isinstance(selected, int) or isinstance(selected, bool):
        raise ChatFileError(f"{where}.selected: must be a number")
    if not 0 <= selected < len(texts):
        raise ChatFileError(f"{where}.selected: {selected} is not one of the {len(texts)} texts")
    dates = value.get("at")
    at_ms = [_json_date(date) for date in dates] if isinstance(dates, list) else []
    at_ms = (at_ms + [None] * len(texts))[: len(texts)]
    if entry.message.get("role") == "user":
        raise ChatFileError(f"{where}: a user message has no alternatives")
    return Alternatives(selected, list(texts), at_ms)
