"""What this hub's data parts in a chat's messages say: progress, the demo model, memory.

A status message of this hub may carry one DataPart with a ``kind``: ``progress`` (the
model loading or waiting), ``tool-progress`` (a consulted persona's answer as it
streams), ``cost-v1`` (an answer's cost, and whether the embedded demo model wrote it)
and ``memory-v1`` (what memory did for the answer, docs/memory.md). Any other agent's
messages carry none of them, and read as nothing here.
"""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import Message
from google.protobuf.json_format import MessageToDict

from persona_agent.a2a.extensions import MEMORY_KIND

__all__ = ["REMEMBERED_WIDTH", "from_demo_model", "kind_of", "progress_of", "remembered_line"]

REMEMBERED_WIDTH = 100
"""Characters of the one line that says what memory did for an answer, at most."""


def _data(message: Message) -> list[dict[str, Any]]:
    """The message's data parts that are objects."""
    found = []
    for part in message.parts:
        if part.HasField("data"):
            data = MessageToDict(part.data)
            if isinstance(data, dict):
                found.append(data)
    return found


def progress_of(message: Message) -> str:
    """Whose progress a status message carries (this hub's ``tool-progress`` data), or ''."""
    for data in _data(message):
        if data.get("kind") == "tool-progress":
            return str(data.get("persona") or data.get("agent") or data.get("tool") or "tool")
    return ""


def kind_of(message: Message) -> str:
    """The ``kind`` of this hub's data part in a status message, or ''."""
    for data in _data(message):
        return str(data.get("kind", ""))
    return ""


def from_demo_model(message: Message) -> bool:
    """Whether a final message's cost-v1 data says the embedded demo model answered."""
    for data in _data(message):
        if data.get("kind") == "cost-v1":
            return data.get("demoModel") is True
    return False


def remembered_line(message: Message) -> str:
    """What memory did for the answer (its memory-v1 data), as the console's
    "Remembered (n)" note says it, on one line of :data:`REMEMBERED_WIDTH` characters at
    most: ``Remembered (2): The user said: ... · Kept: ...``; '' when memory did nothing."""
    for data in _data(message):
        if data.get("kind") != MEMORY_KIND:
            continue
        items = [
            *_texts(data.get("recalled")),
            *(f"Kept: {text}" for text in _texts(data.get("kept"))),
            *(f"Forgot: {text}" for text in _texts(data.get("forgotten"))),
        ]
        if not items:
            return ""
        line = f"Remembered ({len(items)}): " + " · ".join(items)
        return line if len(line) <= REMEMBERED_WIDTH else line[: REMEMBERED_WIDTH - 1] + "…"
    return ""


def _texts(value: object) -> list[str]:
    """The texts of a memory-v1 list, each on one line."""
    if not isinstance(value, list):
        return []
    return [" ".join(str(item).split()) for item in value if str(item).strip()]
