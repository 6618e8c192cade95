"""A lorebook entry's keys, ready to look for: plain text casefolded once, regular
expressions compiled once with RE2, a linear-time engine.

A key written ``/pattern/flags`` (SillyTavern's convention, flags among ``gimsuy``) or any
key of a ``use_regex`` entry is a regular expression. Python's ``re`` backtracks: a key with
nested quantifiers and a message written for it blocked the hub for half a minute on one
"hi". RE2 (``google-re2``) matches in time linear in the text, whatever the pattern, and
refuses what it cannot match that way (backreferences, lookahead and lookbehind, possessive
quantifiers, a repetition over 1000, a program larger than :data:`MAX_REGEX_MEMORY`): such a
key is refused when the persona is loaded (:func:`regex_problem`), never silently dropped.
RE2 is imported with the first key that is a regular expression: personas without one do not
load it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

__all__ = [
    "MAX_REGEX_MEMORY",
    "KeySet",
    "ScanText",
    "compile_regex",
    "regex_problem",
    "regex_source",
]

MAX_REGEX_MEMORY = 1024 * 1024
"""The memory RE2 may use for one key's program and its matching cache (RE2's own default is
8 MiB): a key that needs more is refused at load. Matching stays linear when the cache is
full (RE2 then takes a slower, still linear, path)."""

_SLASHED = re.compile(r"/(.+)/([gimsuy]*)", re.DOTALL)
"""A key written ``/pattern/flags``; matched with ``fullmatch``."""


def regex_source(key: str, use_regex: bool) -> tuple[str, str] | None:
    """The pattern and flags of a key that is a regular expression, else ``None``:
    ``/pattern/flags`` in any entry; any other key of a ``use_regex`` entry, without flags."""
    slashed = _SLASHED.fullmatch(key)
    if slashed is not None:
        return slashed.group(1), slashed.group(2)
    return (key, "") if use_regex else None


@functools.cache
def _options(ignore_case: bool, dot_all: bool) -> Any:
    import re2

    options = re2.Options()
    options.max_mem = MAX_REGEX_MEMORY
    options.log_errors = False  # the reason goes into the refusal, not to stderr
    options.never_capture = True  # only whether it matches is asked
    options.case_sensitive = not ignore_case
    options.dot_nl = dot_all
    return options


_MULTILINE = "(?m)"


def compile_regex(pattern: str, flags: str, sensitive: bool) -> Any:
    """The key's RE2 program, matching UTF-8 bytes (the text is encoded once per scan, not
    once per key). ``i`` (or an entry that is not ``case_sensitive``), ``m`` and ``s`` are
    RE2's own flags; ``g``, ``u`` and ``y`` mean nothing for a search.

    Raises:
        re2.error: RE2 cannot take the pattern.
    """
    import re2

    options = _options("i" in flags or not sensitive, "s" in flags)
    source = _MULTILINE + pattern if "m" in flags else pattern
    return re2.compile(source.encode("utf-8", "surrogatepass"), options)


def regex_problem(key: str, use_regex: bool, sensitive: bool) -> str | None:
    """Why RE2 refuses the key (its own words), or ``None`` when it takes it or the key is
    plain text."""
    source = regex_source(key, use_regex)
    if source is None:
        return None
    import re2

    try:
        compile_regex(*source, sensitive)
    except re2.error as error:
        reason = error.args[0] if error.args else "invalid"
        text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        return text.replace(_MULTILINE, "", 1) if "m" in source[1] else text
    return None


@dataclass(eq=False)
class ScanText:
    """One text to scan, prepared once for every key: casefolded for plain keys that ignore
    case, UTF-8 for regular expressions (each only when a key needs it)."""

    text: str

    @cached_property
    def folded(self) -> str:
        return self.text.casefold()

    @cached_property
    def encoded(self) -> bytes:
        return self.text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True, slots=True)
class KeySet:
    """The keys of one list (an entry's ``keys`` or its ``secondary_keys``), compiled."""

    folded: tuple[str, ...] = ()
    """Plain keys matched without regard to case, casefolded."""
    exact: tuple[str, ...] = ()
    """Plain keys of a ``case_sensitive`` entry."""
    patterns: tuple[Any, ...] = field(default=())
    """Regular expressions (RE2 programs over UTF-8)."""
    written: tuple[str, ...] = ()
    """The keys as the book writes them: ``folded``'s, ``exact``'s, then ``patterns``'s (what
    a prompt's record says fired an entry)."""

    @classmethod
    def of(cls, keys: Iterable[str], *, use_regex: bool, sensitive: bool) -> KeySet:
        """The keys compiled; a blank key is left out (it would match everything).

        Raises:
            re2.error: a regular expression RE2 cannot take (refused at load before).
        """
        folded: list[str] = []
        exact: list[str] = []
        patterns: list[Any] = []
        written: tuple[list[str], list[str], list[str]] = ([], [], [])
        for key in keys:
            if not key.strip():
                continue
            source = regex_source(key, use_regex)
            if source is not None:
                patterns.append(compile_regex(*source, sensitive))
                written[2].append(key)
            elif sensitive:
                exact.append(key)
                written[1].append(key)
            else:
                folded.append(key.casefold())
                written[0].append(key)
        return cls(
            tuple(folded), tuple(exact), tuple(patterns), (*written[0], *written[1], *written[2])
        )

    def __len__(self) -> int:
        return len(self.folded) + len(self.exact) + len(self.patterns)

    def found_in(self, scan: ScanText) -> str | None:
        """The first key (as the book writes it) that is in the text, else ``None``: each
        key one linear search."""
        if not scan.text:
            return None
        # Plain loops: this runs once per entry and text, a generator each time costs more.
        if self.folded:
            folded = scan.folded
            for index, key in enumerate(self.folded):
                if key in folded:
                    return self.written[index]
        for index, key in enumerate(self.exact, len(self.folded)):
            if key in scan.text:
                return self.written[index]
        if self.patterns:
            encoded = scan.encoded
            for index, pattern in enumerate(self.patterns, len(self.folded) + len(self.exact)):
                if pattern.search(encoded) is not None:
                    return self.written[index]
        return None
