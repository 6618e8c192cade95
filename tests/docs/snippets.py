"""The fenced code blocks of README.md and docs/*.md, as the doc tests read them.

Every block is a :class:`Snippet`. A test module takes the blocks it runs with
:func:`claim` at import time (by file and a piece of text only that block holds), so
``test_coverage.py`` knows, without running anything, which test covers which block; a
block nobody claims, and that is not listed there as not runnable, fails that test.

A block's shell commands come from :func:`commands`: one per logical command line,
continuation lines and multi-line quoted strings joined, comment lines dropped, each the
text as written (a test hands it to ``bash -c``); :func:`expect` also checks that they are
the commands the test runs, so a command added to a block fails until it is run too.
"""

from __future__ import annotations

import inspect
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "DOC_FILES",
    "REPO",
    "Snippet",
    "all_snippets",
    "claim",
    "claimed",
    "commands",
    "expect",
    "find",
    "words",
]

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = ("README.md", "docs/*.md")
"""Where the snippets are: every fenced block of these files is run or checked."""

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
"""An opening fence, at any indentation (a block in a list item is a block too)."""


@dataclass(frozen=True)
class Snippet:
    """One fenced block: its file (relative to the repository), the line of its opening
    fence, the first word of its info string (``""`` for none) and its text."""

    path: str
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def __str__(self) -> str:
        first = self.text.strip().splitlines()[0] if self.text.strip() else ""
        return f"{self.where} ({self.lang or 'no language'}: {first[:60]})"


def _blocks(path: Path) -> list[Snippet]:
    relative = str(path.relative_to(REPO))
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence = opening["fence"]
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence[0] * len(fence))
            and not lines[end].strip().strip(fence[0])
        ):
            body.append(lines[end].removeprefix(opening["indent"]))
            end += 1
        if end == len(lines):
            raise AssertionError(f"{relative}:{index + 1}: a code block is never closed")
        info = opening["info"].split()
        found.append(Snippet(relative, index + 1, info[0] if info else "", "\n".join(body)))
        index = end + 1
    return found


@cache
def all_snippets() -> tuple[Snippet, ...]:
    """Every fenced block of :data:`DOC_FILES`, file by file, in order."""
    paths = sorted({p for pattern in DOC_FILES for p in REPO.glob(pattern)})
    return tuple(snippet for path in paths for snippet in _blocks(path))


def find(path: str, contains: str) -> Snippet:
    """The one block of ``path`` whose text holds ``contains`` (or, of several, the one
    that is ``contains`` and nothing else).

    Raises:
        LookupError: no block, or more than one, holds it: the doc changed, and the
            test that runs this block should follow it.
    """
    matches = [s for s in all_snippets() if s.path == path and contains in s.text]
    exact = [s for s in matches if s.text.strip() == contains.strip()]
    if len(exact) == 1:
        return exact[0]
    if len(matches) != 1:
        raise LookupError(
            f"{len(matches)} code blocks of {path} hold {contains!r} (expected one): "
            "update the doc test that runs it (tests/docs/)"
        )
    return matches[0]


_CLAIMS: dict[Snippet, list[str]] = {}


def claim(path: str, contains: str) -> Snippet:
    """:func:`find`, and record that the calling module's tests run or check this block."""
    snippet = find(path, contains)
    frame = inspect.currentframe()
    caller = frame.f_back if frame is not None else None
    module = caller.f_globals.get("__name__", "?") if caller is not None else "?"
    _CLAIMS.setdefault(snippet, []).append(str(module))
    return snippet


def claimed() -> dict[Snippet, list[str]]:
    """Each claimed block and the modules that claimed it (import them all first)."""
    return {snippet: list(modules) for snippet, modules in _CLAIMS.items()}


def commands(snippet: Snippet) -> list[str]:
    """The block's shell commands, as written: lines ending in ``\\`` and quoted strings
    that span lines are joined to the line they continue; blank and comment-only lines
    are left out."""
    found: list[str] = []
    pending: list[str] = []
    for line in snippet.text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending.append(line)
        text = "\n".join(pending)
        if line.rstrip().endswith("\\"):
            continue
        try:
            shlex.split(text, comments=True)
        except ValueError:  # a quoted string goes on over the next line
            continue
        found.append(text)
        pending = []
    if pending:
        raise AssertionError(f"{snippet}: unfinished shell command {pending!r}")
    return found


def expect(snippet: Snippet, *starts: str) -> list[str]:
    """The block's commands, once each begins as ``starts`` says (in order, no more): a
    command added to the block fails the test that runs it, until it runs the new one."""
    found = commands(snippet)
    assert [c[: len(s)] for c, s in zip(found, starts, strict=False)] == list(starts), found
    assert len(found) == len(starts), f"{snippet}: {found}"
    return found


def words(command: str) -> list[str]:
    """A command's words as the shell splits them (comments dropped, line continuations
    removed)."""
    return shlex.split(command.replace("\\\n", " "), comments=True)
