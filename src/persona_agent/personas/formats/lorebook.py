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
  ``use_regex`` entry is a regular expression in RE2's syntax, matched in linear time
  (:mod:`persona_agent.personas.formats.lore_keys`); a key RE2 cannot take makes the entry invalid;
- with ``recursive_scanning``, the contents matched in one round (``macros`` applied) are
  scanned for the other entries' keys in the next, until no new entry matches. Each text
  is scanned once: a round scans only the contents it adds (a key is found within the
  messages, or within one round's contents, not across the two);
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

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Self

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
    model_validator,
)
from pydantic_core import PydanticCustomError

from persona_agent.personas.formats.lore_keys import KeySet, ScanText, regex_problem

__all__ = [
    "DEFAULT_SCAN_DEPTH",
    "FiredLore",
    "LoreEntry",
    "LoreIndex",
    "LoreSelection",
    "Lorebook",
    "estimate_tokens",
    "select_lore",
]

DEFAULT_SCAN_DEPTH = 2
"""Messages scanned when the book does not say (SillyTavern's default): the new message
and the answer before it."""

Number = StrictInt | Annotated[StrictFloat, Field(allow_inf_nan=False)]
"""A JSON number, not a boolean; NaN and infinities have no JSON form and no order."""

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

    def title(self) -> str | None:
        """What people call the entry: its ``comment`` (SillyTavern's title) or ``name``."""
        for title in (self.comment, self.name):
            if title is not None and title.strip():
                return title.strip()
        return None

    @model_validator(mode="after")
    def _keys_compile(self) -> Self:
        sensitive = bool(self.case_sensitive)
        for name in ("keys", "secondary_keys"):
            for index, key in enumerate(getattr(self, name) or ()):
                reason = regex_problem(key, bool(self.use_regex), sensitive)
                if reason is None:
                    continue
                title = self.title()
                shown = key if len(key) <= 100 else key[:100] + "..."
                of_entry = f" of the entry {title!r}" if title else ""
                raise PydanticCustomError(  # no context: the key's braces stay as they are
                    "lore_regex",
                    f"{name}[{index}] '{shown}'{of_entry} is a regular expression RE2 cannot "
                    f"take: {reason} (lore keys are matched in linear time with RE2 syntax: "
                    "no backreferences, lookahead or lookbehind; docs/personas.md#lorebooks)",
                )
        return self


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
    fired: tuple[FiredLore, ...] = field(default=(), compare=False)
    """Each entry brought up, in insertion order: what fired it (for the prompt's record)."""
    cut: tuple[FiredLore, ...] = field(default=(), compare=False)
    """Entries the conversation brought up that did not fit the book's ``token_budget``."""

    def __bool__(self) -> bool:
        return bool(self.before or self.after)


@dataclass(frozen=True, slots=True)
class FiredLore:
    """An entry the conversation brought up, and why: the keys found (none for a
    ``constant`` entry)."""

    title: str
    """Its ``comment`` or ``name``, else ``entry {n}`` (its place in the book, from 1)."""
    keys: tuple[str, ...]
    """The key found, and the secondary key found (a selective entry's), as written."""
    constant: bool
    position: str
    """``before_char`` or ``after_char``: where in the system prompt it goes."""
    text: str
    tokens: int


def estimate_tokens(text: str) -> int:
    """Characters / 4, rounded up: there is no tokenizer for every model, and this is the
    rule of thumb the other tools use without one."""
    return math.ceil(len(text) / 4)


def select_lore(
    book: Lorebook, recent: Sequence[str], *, macros: Callable[[str], str] = lambda text: text
) -> LoreSelection:
    """The entries of ``book`` that ``recent`` (the conversation's messages, oldest first,
    ending with the new one) brings up, within the book's token budget, with ``macros``
    applied to their contents. Compiles the book's keys each call: for many calls, keep a
    :class:`LoreIndex`."""
    return LoreIndex(book).select(recent, macros=macros)


@dataclass(frozen=True, slots=True)
class _Candidate:
    """An entry that may be brought up: enabled, with a content."""

    index: int
    entry: LoreEntry
    text: str
    keys: KeySet
    secondary: KeySet | None
    """``None`` unless the entry is ``selective`` with secondary keys."""


class LoreIndex:
    """A lorebook ready to scan: each key casefolded or compiled once, when the index is
    made; a scan is then linear in the scanned text times the number of keys.

    Raises:
        re2.error: a regular expression RE2 cannot take (a validated book has none).
    """

    def __init__(self, book: Lorebook) -> None:
        self.book = book
        self.candidates: tuple[_Candidate, ...] = tuple(
            _candidate(index, entry, text)
            for index, entry in enumerate(book.entries)
            if entry.enabled is not False and (text := entry.text())
        )
        self.keys = sum(
            len(c.keys) + (len(c.secondary) if c.secondary is not None else 0)
            for c in self.candidates
        )
        """How many keys a scan looks for."""
        self.content_chars = sum(len(c.text) for c in self.candidates)
        """The length of every content that may be brought up (what recursion may scan)."""

    def scanned(self, recent: Sequence[str]) -> str:
        """The text of ``recent`` a scan looks at: the last ``scan_depth`` messages."""
        if isinstance(recent, str):
            raise TypeError("recent is a sequence of messages, not one string")
        depth = DEFAULT_SCAN_DEPTH if self.book.scan_depth is None else self.book.scan_depth
        return "\n".join(recent[-depth:]) if depth else ""

    def select(
        self, recent: Sequence[str], *, macros: Callable[[str], str] = lambda text: text
    ) -> LoreSelection:
        """As :func:`select_lore`."""
        matched = self._match(ScanText(self.scanned(recent)), macros)
        return _within_budget(self.book, matched)

    def _match(self, scan: ScanText, macros: Callable[[str], str]) -> dict[int, _Matched]:
        """The messages, then (recursive_scanning) each round's new contents, each scanned
        once; an entry's keys and secondary keys may be found in different texts."""
        recursive = bool(self.book.recursive_scanning)
        # Each entry not yet matched, with the key lists still to be found (None: found)
        # and the keys found so far.
        waiting: list[tuple[_Candidate, KeySet | None, KeySet | None, tuple[str, ...]]] = [
            (c, None, None, ()) if c.entry.constant else (c, c.keys, c.secondary, ())
            for c in self.candidates
        ]
        matched: dict[int, _Matched] = {}
        while True:
            found: dict[int, _Matched] = {}
            still: list[tuple[_Candidate, KeySet | None, KeySet | None, tuple[str, ...]]] = []
            for candidate, keys, secondary, fired in waiting:
                if keys is not None and (key := keys.found_in(scan)) is not None:
                    keys, fired = None, (*fired, key)
                if (
                    secondary is not None
                    and (keys is None or recursive)  # else it cannot match this time
                    and (key := secondary.found_in(scan)) is not None
                ):
                    secondary, fired = None, (*fired, key)
                if keys is None and secondary is None:
                    found[candidate.index] = _Matched(
                        candidate.entry, macros(candidate.text), fired
                    )
                else:
                    still.append((candidate, keys, secondary, fired))
            matched.update(found)
            if not found or not recursive:
                return matched
            waiting = still
            scan = ScanText("\n".join(item.text for item in found.values()))


@dataclass(frozen=True, slots=True)
class _Matched:
    """An entry brought up: its content (``macros`` applied) and the keys found."""

    entry: LoreEntry
    text: str
    keys: tuple[str, ...]


def _candidate(index: int, entry: LoreEntry, text: str) -> _Candidate:
    sensitive = bool(entry.case_sensitive)
    regex = bool(entry.use_regex)
    keys = KeySet.of(entry.keys or (), use_regex=regex, sensitive=sensitive)
    secondary = None
    if entry.selective and entry.secondary_keys:
        secondary = KeySet.of(entry.secondary_keys, use_regex=regex, sensitive=sensitive)
    return _Candidate(index, entry, text, keys, secondary)


def _within_budget(book: Lorebook, matched: dict[int, _Matched]) -> LoreSelection:
    """The matched entries, the most important first, until one does not fit the budget;
    in insertion order at their position."""
    kept: list[tuple[int, _Matched]] = []
    cut: list[FiredLore] = []
    seen: set[str] = set()
    used = 0
    for index, item in sorted(
        matched.items(), key=lambda pair: (-_importance(pair[1].entry), pair[0])
    ):
        if not item.text.strip() or item.text in seen:
            continue  # blank once the macros are applied, or already there
        cost = estimate_tokens(item.text)
        if cut or (book.token_budget is not None and used + cost > book.token_budget):
            cut.append(_fired(index, item))
            continue
        kept.append((index, item))
        seen.add(item.text)
        used += cost

    kept.sort(key=lambda pair: (pair[1].entry.insertion_order or 0, pair[0]))
    after = tuple(item.text for _, item in kept if item.entry.position == "after_char")
    before = tuple(item.text for _, item in kept if item.entry.position != "after_char")
    fired = tuple(_fired(index, item) for index, item in kept)
    return LoreSelection(before, after, used, fired, tuple(cut))


def _fired(index: int, item: _Matched) -> FiredLore:
    entry = item.entry
    return FiredLore(
        title=entry.title() or f"entry {index + 1}",
        keys=item.keys,
        constant=bool(entry.constant),
        position="after_char" if entry.position == "after_char" else "before_char",
        text=item.text,
        tokens=estimate_tokens(item.text),
    )


def _importance(entry: LoreEntry) -> float:
    value = entry.priority if entry.priority is not None else entry.insertion_order
    return float(value or 0)
