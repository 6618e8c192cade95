"""Lorebooks: background put into the prompt only when the conversation brings it up.

The shape is a Tavern character card's ``character_book`` (Character Card V2; V3 adds
``use_regex``), which SillyTavern calls world info; a persona's own ``lore:`` has the same
shape. Before each answer, :func:`select_lore` scans the latest ``scan_depth`` messages:

- an entry matches when it is ``constant``, or one of its ``keys`` is in the scanned text
  (and, with ``selective``, one of its ``secondary_keys`` too);
- keys are plain text, matched case-insensitively unless ``case_sensitive``; a key
  written ``/pattern/flags`` (SillyTavern's convention) or any key of a ``use_regex``
  entry is a regular expression; one that does not compile never matches;
- with ``recursive_scanning``, matched contents are scanned for the other entries' keys;
- the matched entries are kept, most important first (``priority``, else
  ``insertion_order``), while they fit in ``token_budget``; they go into the prompt in
  ``insertion_order`` at their ``position`` (``before_char`` or ``after_char``).

Every field of the format is kept as given (absent fields stay absent, unknown ones are
kept), so that a card's book is exported exactly as it was imported.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_serializer,
)

__all__ = [
    "DEFAULT_SCAN_DEPTH",
    "LoreEntry",
    "LoreSelection",
    "Lorebook",
    "estimate_tokens",
    "select_lore",
]

DEFAULT_SCAN_DEPTH = 2
"""Messages scanned when the book does not say: the new message and the answer before it."""

MAX_KEY_CHARS = 1000
"""A longer key never matches (Python's ``re`` has no timeout; this bounds a pattern)."""

Number = StrictInt | StrictFloat
_SLASHED = re.compile(r"^/(.+)/([gimsuy]*)$", re.DOTALL)
_DECORATOR = re.compile(r"\A(?:[ \t]*@@[^\n]*(?:\n|\Z))+\s*")


class _AsGiven(BaseModel):
    """A model whose optional fields default to ``None`` (absent) and whose explicit
    ``null`` values survive a dump with ``exclude_defaults``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @model_serializer(mode="wrap")
    def _with_explicit_nulls(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if info.exclude_defaults and not info.exclude_none:
            for name in self.model_fields_set:
                if name not in data and getattr(self, name, None) is None:
                    data[name] = None
        return data


class LoreEntry(_AsGiven):
    """One entry of a lorebook."""

    keys: list[StrictStr] | None = None
    content: StrictStr
    extensions: dict[str, Any] | None = None
    enabled: StrictBool | None = None
    insertion_order: Number | None = None
    case_sensitive: StrictBool | None = None
    use_regex: StrictBool | None = None
    constant: StrictBool | None = None
    name: StrictStr | None = None
    priority: Number | None = None
    id: StrictInt | StrictStr | None = None
    comment: StrictStr | None = None
    selective: StrictBool | None = None
    secondary_keys: list[StrictStr] | None = None
    position: StrictStr | None = None
    """``before_char`` (also when absent or unknown) or ``after_char``."""

    def text(self) -> str:
        """The content without V3 decorator lines (``@@depth 4``) at its top."""
        return _DECORATOR.sub("", self.content, count=1).strip()


class Lorebook(_AsGiven):
    """A lorebook: a card's ``character_book``, or a persona's ``lore:``."""

    name: StrictStr | None = None
    description: StrictStr | None = None
    scan_depth: Annotated[StrictInt, Field(ge=0)] | None = None
    token_budget: Annotated[StrictInt, Field(ge=0)] | None = None
    recursive_scanning: StrictBool | None = None
    extensions: dict[str, Any] | None = None
    entries: list[LoreEntry]


@dataclass(frozen=True, slots=True)
class LoreSelection:
    """The entries a conversation brought up, as text for the prompt."""

    before: tuple[str, ...] = ()
    """Contents for ahead of the character's description, in insertion order."""
    after: tuple[str, ...] = ()
    """Contents for after it."""
    tokens: int = 0
    """Estimated tokens of all of them (:func:`estimate_tokens`)."""

    def __bool__(self) -> bool:
        return bool(self.before or self.after)


def estimate_tokens(text: str) -> int:
    """Characters / 4, rounded up: there is no tokenizer for every model, and this is the
    rule of thumb the other tools use without one."""
    return math.ceil(len(text) / 4)


def select_lore(
    book: Lorebook, recent: Sequence[str], *, macros: Callable[[str], str] = lambda text: text
) -> LoreSelection:
    """The entries of ``book`` that ``recent`` (the conversation's messages, oldest first,
    ending with the new one) brings up, within the book's token budget."""
    depth = DEFAULT_SCAN_DEPTH if book.scan_depth is None else book.scan_depth
    scanned = "\n".join(recent[-depth:]) if depth else ""
    candidates = [
        (index, entry)
        for index, entry in enumerate(book.entries)
        if entry.enabled is not False and entry.text()
    ]
    matched: dict[int, LoreEntry] = {}
    while True:
        found = {
            index: entry
            for index, entry in candidates
            if index not in matched and _matches(entry, scanned)
        }
        if not found:
            break
        matched.update(found)
        if not book.recursive_scanning:
            break
        scanned += "\n" + "\n".join(entry.text() for entry in found.values())

    budget = book.token_budget
    kept: list[tuple[int, LoreEntry, str]] = []
    used = 0
    for index, entry in sorted(matched.items(), key=lambda item: (-_importance(item[1]), item[0])):
        text = macros(entry.text())
        cost = estimate_tokens(text)
        if budget is not None and used + cost > budget:
            break
        kept.append((index, entry, text))
        used += cost
    kept.sort(key=lambda item: (item[1].insertion_order or 0, item[0]))
    after = tuple(text for _, entry, text in kept if entry.position == "after_char")
    before = tuple(text for _, entry, text in kept if entry.position != "after_char")
    return LoreSelection(before, after, used)


def _importance(entry: LoreEntry) -> float:
    value = entry.priority if entry.priority is not None else entry.insertion_order
    return float(value or 0)


def _matches(entry: LoreEntry, text: str) -> bool:
    if entry.constant:
        return True
    if not text or not _any_key(entry, entry.keys or [], text):
        return False
    if entry.selective and entry.secondary_keys:
        return _any_key(entry, entry.secondary_keys, text)
    return True


def _any_key(entry: LoreEntry, keys: list[str], text: str) -> bool:
    sensitive = bool(entry.case_sensitive)
    for key in keys:
        if not key.strip() or len(key) > MAX_KEY_CHARS:
            continue
        pattern = _pattern(key, bool(entry.use_regex), sensitive)
        if pattern is None:
            if (key in text) if sensitive else (key.casefold() in text.casefold()):
                return True
        elif pattern is not _INVALID and pattern.search(text):
            return True
    return False


_INVALID = re.compile(r"(?!)")
"""Stands for a key that does not compile: it never matches."""


@functools.lru_cache(maxsize=1024)
def _pattern(key: str, use_regex: bool, sensitive: bool) -> re.Pattern[str] | None:
    """The key's regular expression, :data:`_INVALID`, or ``None`` for plain text."""
    flags = 0 if sensitive else re.IGNORECASE
    slashed = _SLASHED.match(key)
    if slashed is not None:
        source = slashed.group(1)
        for letter, flag in (("i", re.IGNORECASE), ("m", re.MULTILINE), ("s", re.DOTALL)):
            if letter in slashed.group(2):
                flags |= flag
    elif use_regex:
        source = key
    else:
        return None
    try:
        return re.compile(source, flags)
    except re.error:
        return _INVALID
