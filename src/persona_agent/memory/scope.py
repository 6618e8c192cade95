"""Whose memory a turn reads and adds to, and the engine's view of memory (no memory by
default: this module loads nothing of the memory's own, so a hub without it pays nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["NO_MEMORY", "MemoryScope", "TurnMemory"]


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Whose memory: a persona's with one caller (``owner``; empty: anonymous, and then
    only the one ``conversation``)."""

    persona_id: str
    owner: str
    conversation: str


class TurnMemory:
    """No memory (the default): nothing recalled, nothing kept."""

    async def recall(
        self, scope: MemoryScope, message: str, in_prompt: Sequence[str]
    ) -> tuple[str, ...]:
        """What to add to the prompt of the turn answering ``message``, each item marked
        with who said it; ``in_prompt``: texts the prompt has already."""
        return ()

    async def keep(self, scope: MemoryScope, said: Sequence[dict[str, Any]]) -> None:
        """Remember a completed turn's messages (the user's and the persona's answers)."""


NO_MEMORY = TurnMemory()
