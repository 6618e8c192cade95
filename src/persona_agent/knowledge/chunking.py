"""A document's text cut into passages: each at most ``size`` characters, cut at a
paragraph or sentence where one is near, the next starting a little before (``overlap``) so that
a fact cut in two is whole in one of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from persona_agent.errors import DocumentTooLargeError

__all__ = ["Chunk", "chunk_pages"]

_SPACES = re.compile(r"[ \t\r\f\v]+")
_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")
"""Where a passage is best cut, the best first."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage: its place in the document (``position``, from 0), the PDF page it
    starts on (none for other documents), its text."""

    position: int
    page: int | None
    text: str


def chunk_pages(
    name: str,
    pages: Sequence[tuple[int | None, str]],
    *,
    size: int = 600,
    overlap: int = 85,
    max_chunks: int = 2000,
) -> list[Chunk]:
    """The passages of a document's pages (a passage does not straddle two pages).

    Raises:
        DocumentTooLargeError: the text makes more than ``max_chunks`` passages (said
            before the work of embedding them).
    """
    chunks: list[Chunk] = []
    for page, raw in pages:
        text = "\n".join(_SPACES.sub(" ", line).strip() for line in raw.splitlines()).strip()
        start = 0
        while start < len(text):
            end = _cut(text, start, size)
            passage = text[start:end].strip()
            if passage:
                if len(chunks) >= max_chunks:
                    raise DocumentTooLargeError(
                        f"{name}: its text makes more than {max_chunks} passages of "
                        f"{size} characters (PERSONA_AGENT_KNOWLEDGE_MAX_CHUNKS): split it"
                    )
                chunks.append(Chunk(len(chunks), page, passage))
            if end >= len(text):
                break
            start = _restart(text, max(end - overlap, start + 1), end)
    return chunks


def _restart(text: str, earliest: int, end: int) -> int:
    """Where the next passage begins, at or after ``earliest`` and before ``end`` (the last
    one's end): at a line's or sentence's start if one is there, else a word's."""
    for mark in ("\n", ". ", "? ", "! ", " "):
        found = text.find(mark, earliest, end)
        if found != -1 and found + len(mark) < end:
            return found + len(mark)
    return earliest


def _cut(text: str, start: int, size: int) -> int:
    """Where the passage starting at ``start`` ends: at the best break in its second half
    (a paragraph's end first, then a line's, a sentence's...), else at ``size``
    characters."""
    end = start + size
    if end >= len(text):
        return len(text)
    floor = start + size // 2
    for mark in _BREAKS:
        found = text.rfind(mark, floor, end)
        if found != -1:
            return found + len(mark)
    return end
