"""The lore a conversation brings up (and the system prompt with it), off the event loop
when the scan is large.

A persona's book is made ready to scan once per version of the persona (a
:class:`~persona_agent.personas.formats.lorebook.LoreIndex`, kept like rendered prompts): keys
casefolded, regular expressions compiled. A scan is then linear in the scanned text times
the number of keys. Making a large book ready, or a scan whose cost passes
:data:`INLINE_SCAN_WORK` (a 10,000-entry book, a long message), runs in a worker thread, so
the event loop (``/healthz``, every other persona) never waits on it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Sequence

from persona_agent.personas.formats.lorebook import LoreIndex, LoreSelection
from persona_agent.personas.macros import USER_NAME
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import PROMPT_CACHE_SIZE, apply_macros, render_system_prompt

__all__ = [
    "INLINE_BOOK_ENTRIES",
    "INLINE_SCAN_WORK",
    "lore_index",
    "lore_selection",
    "lore_selection_sync",
    "lore_system_prompt",
    "lore_system_prompt_sync",
]

INLINE_SCAN_WORK = 200_000
"""The largest scan done on the event loop: characters scanned × keys looked for (a 2,000
character message against 100 keys: well under a millisecond)."""

INLINE_BOOK_ENTRIES = 64
"""The largest book made ready to scan on the event loop; a larger one is made ready in a
worker thread (compiling and casefolding its keys takes milliseconds)."""


class _Indexes:
    """Books ready to scan, by persona (its hash is its id and version), the least recently
    used dropped past ``size``; used from the event loop and from worker threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Persona, LoreIndex] = OrderedDict()
        self._lock = threading.Lock()

    def peek(self, persona: Persona) -> LoreIndex | None:
        with self._lock:
            index = self._items.get(persona)
            if index is not None:
                self._items.move_to_end(persona)
            return index

    def get(self, persona: Persona) -> LoreIndex:
        index = self.peek(persona)
        if index is not None:
            return index
        assert persona.lore is not None
        index = LoreIndex(persona.lore)  # outside the lock: it may take a while
        with self._lock:
            self._items[persona] = index
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return index


_INDEXES = _Indexes(PROMPT_CACHE_SIZE)


def lore_index(persona: Persona) -> LoreIndex | None:
    """The persona's book ready to scan (``None`` without one), kept for its version."""
    return _INDEXES.get(persona) if persona.lore is not None else None


def lore_selection_sync(
    persona: Persona, recent: Sequence[str], user: str = USER_NAME
) -> LoreSelection | None:
    """The lore entries ``recent`` (the conversation's messages, oldest first) brings up,
    macros replaced (``{{user}}`` as ``user``); ``None`` for a persona without a book."""
    index = lore_index(persona)
    if index is None:
        return None
    name = persona.name.strip()
    return index.select(recent, macros=lambda text: apply_macros(text, name, user))


async def lore_selection(
    persona: Persona, recent: Sequence[str], user: str = USER_NAME
) -> LoreSelection | None:
    """:func:`lore_selection_sync`, in a worker thread when making the book ready or
    scanning would hold the event loop for more than a moment."""
    if persona.lore is None:
        return None
    index = _INDEXES.peek(persona)
    if index is None:
        if len(persona.lore.entries) > INLINE_BOOK_ENTRIES:
            return await asyncio.to_thread(lore_selection_sync, persona, recent, user)
        index = _INDEXES.get(persona)
    chars = len(index.scanned(recent))
    if persona.lore.recursive_scanning:
        chars += index.content_chars  # what recursion may scan besides
    if chars * index.keys <= INLINE_SCAN_WORK:
        return lore_selection_sync(persona, recent, user)
    return await asyncio.to_thread(lore_selection_sync, persona, recent, user)


def lore_system_prompt_sync(persona: Persona, recent: Sequence[str]) -> str:
    """The persona's system prompt with the lore entries ``recent`` (the conversation's
    messages, oldest first) brings up."""
    return render_system_prompt(persona, lore_selection_sync(persona, recent))


async def lore_system_prompt(persona: Persona, recent: Sequence[str]) -> str:
    """:func:`lore_system_prompt_sync`, the scan off the event loop when it is large
    (:func:`lore_selection`)."""
    return render_system_prompt(persona, await lore_selection(persona, recent))
