"""A conversation as a Markdown transcript to read (an export only: nothing reads it back)."""

from __future__ import annotations

from persona_agent.conversations.files.chat_file import ImportedChat, iso_of
from persona_agent.llm.base import message_text

__all__ = ["to_markdown"]


def to_markdown(chat: ImportedChat, *, title: str) -> str:
    """A transcript to read: each user and persona message of the selected branch with its
    speaker and time; tool calls and results are left out, and an answer with
    alternatives says which of them it is."""
    user = chat.user_name or "User"
    character = chat.character_name or "Persona"
    lines = [f"# {title}", ""]
    for index, entry in enumerate(chat.messages):
        role = entry.message.get("role")
        text = message_text(entry.message, "\n").strip()
        if role == "tool" or not text:
            continue
        speaker = user if role == "user" else character
        when = iso_of(entry.at_ms)
        heading = f"**{speaker}**" + (f" ({when.replace('T', ' ')[:16]} UTC)" if when else "")
        alternatives = chat.swipes.get(index)
        if alternatives is not None:
            heading += f" (alternative {alternatives.selected + 1} of {len(alternatives.texts)})"
        lines += [heading, "", text, ""]
    return "\n".join(lines)
