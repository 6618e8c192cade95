"""Lorebooks: background put into the prompt only when the conversation brings it up.

The shape is a Tavern character card's ``character_book`` (Character Card V2; V3 adds
``use_regex`` and ``@@`` decorator lines), which SillyTavern calls world info; a persona's
own ``lore:`` has the same shape. Before each answer, :func:`select_lore` scans the latest
``scan_depth`` messages (default :data:`DEFAULT_SCAN_DEPTH`):

- an entry is a candidate when it is enabled and its content, without the V3 decorator
  lines at its top, is not blank;
- it matches when it is ``constant``, or one of its ``keys`` is in the scanned text (and,
  with ``selective`` and a non-empty ``secondary_keys``, one of those too);
- keys are plain text, matched case-insensitively unless ``case_sensitive``; a key written
  ``/pattern/flags`` (SillyTavern's convention, flags among ``gimsuy``) or any key of a
  ``use_regex`` entry is a Python regular expression; one that does not compile never
  matches. Python's ``re`` has no timeout, so keys longer than :data:`MAX_KEY_CHARS` never
  match: a bound on the patterns a book can bring, not a guarantee against every slow one;
- with ``recursive_scanning``, matched contents (``macros`` applied) are scanned for the
  other entries' keys, until no new entry matches;
- the matched entries are kept, most important first (``priority``, else
  ``insertion_order``), until the next one would overflow ``token_budget`` (tokens are
  estimated, :func:`estimate_tokens`); they go into the prompt in ``insertion_order`` at
  their ``position`` (``before_char``, also for an unknown value, or ``after_char``).
  A content that is blank once ``macros`` are applied, or the same as one already kept,
  is left out.

Every field is kept as given: absent fields stay absent (every optional field defaults to
``None``; the defaults above apply only when selecting), explicit ``null`` values and
unknown fields are kept, so that a card's book is exported exactly as it was imported
with ``model_dump(mode="json", exclude_defaults=True)``.
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
    "MAX_KEY_CHARS",
    "LoreEntry",
    "LoreSelection",
    "Lorebook",
    "estimate_tokens",
    "select_lore",
]

DEFAULT_SCAN_DEPTH = 2
"""Messages scanned when the book does not say (SillyTavern's default): the new message
and the answer before it."""

MAX_KEY_CHARS = 1000
"""A longer key never matches (Python's ``re`` has no timeout; this bounds a pattern)."""

Number = StrictInt | Annotated[StrictFloat, Field(allow_inf_nan=False)]
"""A JSON number, not a boolean; NaN and infinities have no JSON form and no order."""

_SLASHED = re.compile(r"/(.+)/([gimsuy]*)", re.DOTALL)
"""A key written ``/pattern/flags``; matched with ``fullmatch``."""
_DECORATOR = re.compile(r"\A(?:[ \t]*@@[^\n]*(?:\n|\Z))+\s*")
"""The V3 decorator lines (``@@depth 4``) at the top of a content, and the blank lines
after them."""


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
                if name not in data and getattr(self, name) is None and _wanted(info, name):
                    data[name] = None
        return data


def _wanted(info: SerializationInfo, name: str) -> bool:
    """Whether the dump's own ``include``/``exclude`` leave the field ``name`` in."""
    exclude: Any = info.exclude  # a set of names, or a dict of names to True (or to parts)
    excluded = (
        exclude is not None
        and name in exclude
        and (not isinstance(exclude, dict) or exclude[name] in (True, ...))
    )
    return not excluded and (info.include is None or name in info.include)


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
        """The content without V3 decorator lines (``@@depth 4``) at its top, stripped."""
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
    ending with the new one) brings up, within the book's token budget, with ``macros``
    applied to their contents."""
    if isinstance(recent, str):
        raise TypeError("recent is a sequence of messages, not one string")
    depth = DEFAULT_SCAN_DEPTH if book.scan_depth is None else book.scan_depth
    scanned = "\n".join(recent[-depth:]) if depth else ""
    candidates = [
        (index, entry, text)
        for index, entry in enumerate(book.entries)
        if entry.enabled is not False and (text := entry.text())
    ]

    # Matching: the messages, then (recursive_scanning) the contents matched so far.
    matched: dict[int, tuple[LoreEntry, str]] = {}
    while True:
        found = {
            index: (entry, macros(text))
            for index, entry, text in candidates
            if index not in matched and _matches(entry, scanned)
        }
        matched.update(found)
        if not found or not book.recursive_scanning:
            break
        scanned += "".join("\n" + text for _, text in found.values())

    # The budget: the most important first, until one does not fit.
    kept: list[tuple[int, LoreEntry, str]] = []
    seen: set[str] = set()
    used = 0
    for index, (entry, text) in sorted(
        matched.items(), key=lambda item: (-_importance(item[1][0]), item[0])
    ):
        if not text.strip() or text in seen:
            continue  # blank once the macros are applied, or already there
        cost = estimate_tokens(text)
        if book.token_budget is not None and used + cost > book.token_budget:
            break
        kept.append((index, entry, text))
        seen.add(text)
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
    folded = text if sensitive else text.casefold()
    for key in keys:
        if not key.strip() or len(key) > MAX_KEY_CHARS:
            continue
        pattern = _pattern(key, bool(entry.use_regex), sensitive)
        if pattern is None:
            if (key if sensitive else key.casefold()) in folded:
                return True
        elif pattern is not _INVALID and pattern.search(text):
            return True
    return False


_INVALID = re.compile(r"(?!)")
"""Stands for a key that does not compile: it never matches."""


@functools.lru_cache(maxsize=1024)
def _pattern(key: str, use_regex: bool, sensitive: bool) -> re.Pattern[str] | None:
    """The key's regular expression, :data:`_INVALID`, or ``None`` for plain text.

    ``/pattern/flags`` is a regular expression in any entry (flags ``i``, ``m``, ``s``
    count; ``g``, ``u``, ``y`` mean nothing for a search), as in SillyTavern and in
    RisuAI's ``use_regex`` entries; another key only in a ``use_regex`` entry."""
    flags = 0 if sensitive else re.IGNORECASE
    slashed = _SLASHED.fullmatch(key)
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
    except (re.error, RecursionError, OverflowError):
        return _INVALID
