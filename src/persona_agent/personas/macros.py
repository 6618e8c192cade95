"""Character-card macros (``{{char}}``, ``{{user}}``, ``<BOT>``, ``<USER>``): replacing them,
and counting what replacing them makes of a text without doing it.

The counting is what bounds a persona at load (:mod:`persona_agent.personas.expansion`):
a 60 KB card whose greeting is thousands of ``{{char}}`` and whose name is long becomes a
100 MB prompt once the macros are replaced, so the size a text will have is computed,
linearly, before anything is replaced.
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_USER_NAME_CHARS",
    "USER_NAME",
    "apply_macros",
    "expanded_length",
    "macro_counts",
]

USER_NAME = "User"
"""What ``{{user}}`` becomes: the hub does not know the caller's name."""

MAX_USER_NAME_CHARS = 64
"""The longest name ``{{user}}`` may stand for. Today it is :data:`USER_NAME`; a caller's
own display name (to come) will be held to this, and the bounds a persona is checked
against at load count every ``{{user}}`` at this length, so that no name a caller gives
can make a persona's text larger than what was checked."""

_MACRO = re.compile(r"\{\{\s*(char|user)\s*\}\}|<(bot|char|user)>", re.IGNORECASE)
ORIGINAL = re.compile(r"\{\{\s*original\s*\}\}", re.IGNORECASE)
"""``{{original}}`` in a persona's own system prompt: the hub's opening of the prompt."""


def apply_macros(text: str, char: str, user: str = USER_NAME) -> str:
    """``text`` with ``{{char}}``/``<BOT>``/``<CHAR>`` as ``char`` and ``{{user}}``/``<USER>``
    as ``user`` (any letter case)."""
    if "{" not in text and "<" not in text:
        return text

    def name(match: re.Match[str]) -> str:
        word = (match.group(1) or match.group(2)).lower()
        return user if word == "user" else char

    return _MACRO.sub(name, text)


def macro_counts(text: str) -> tuple[int, int, int]:
    """How many ``{{char}}`` (with ``<BOT>``, ``<CHAR>``) and ``{{user}}`` (with ``<USER>``)
    macros ``text`` has, and how many characters they take: one pass over the text."""
    if "{" not in text and "<" not in text:
        return 0, 0, 0
    chars = users = taken = 0
    for match in _MACRO.finditer(text):
        if (match.group(1) or match.group(2)).lower() == "user":
            users += 1
        else:
            chars += 1
        taken += match.end() - match.start()
    return chars, users, taken


def expanded_length(text: str, char_chars: int, user_chars: int = MAX_USER_NAME_CHARS) -> int:
    """The length :func:`apply_macros` gives ``text`` with a name of ``char_chars``
    characters and a user's name of ``user_chars``, computed without replacing anything."""
    chars, users, taken = macro_counts(text)
    return len(text) - taken + chars * char_chars + users * user_chars
