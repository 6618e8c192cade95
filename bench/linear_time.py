"""Work that must stay linear in its input (issue 33: timing goals belong here, not in the
tests): a written conversation of 100,000 lines, lore keys with nested quantifiers over
200,000 characters, and a recursive lorebook of 500 chained entries. Each is timed (best
of 3) against its target; prints a Markdown table and exits 1 when a target is missed.
A few seconds on 2 cores.

    uv run python bench/linear_time.py

The tests (tests/personas/test_bounds.py, test_lore.py) check the same inputs' results;
a quadratic or exponential version of any of them takes minutes here, not a second.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from persona_agent.personas.formats.lorebook import Lorebook, select_lore
from persona_agent.personas.prompt import conversation_turns

ROUNDS = 3


def book(*entries: dict[str, Any], **fields: Any) -> Lorebook:
    return Lorebook.model_validate({"entries": list(entries), **fields})


def written_conversation() -> None:
    """A persona's sample conversation of 100,000 lines, read into turns (each line added
    to the turn so far once copied the whole turn again)."""
    content = "A: start\n" + "more words\n" * 100_000
    turns = conversation_turns(content, "Orla")
    assert len(turns) == 1


def nested_quantifiers() -> None:
    """Lore keys ``(a+)+$`` and ``(x|x)*y`` against text made to trip a backtracking
    matcher (Python's ``re`` would take days on 40 characters)."""
    lore = book({"keys": ["/(a+)+$/", "/(x|x)*y/"], "content": "Never."})
    selection = select_lore(lore, ["a" * 100_000 + "!" + "x" * 100_000])
    assert [*selection.before, *selection.after] == []


def recursive_chain() -> None:
    """Recursive scanning of 500 entries, each found in the one before: each content is
    scanned once, not everything again in each of 500 rounds."""
    chain = book(
        *({"keys": [f"<{n}>"], "content": f"<{n + 1}> " + "x" * 50} for n in range(500)),
        recursive_scanning=True,
    )
    selection = select_lore(chain, ["<0>"])
    assert len([*selection.before, *selection.after]) == 500


CASES: list[tuple[str, Callable[[], None], float]] = [
    ("a written conversation of 100,000 lines", written_conversation, 1.0),
    ("nested-quantifier lore keys over 200,000 characters", nested_quantifiers, 1.0),
    ("recursive lore, 500 chained entries", recursive_chain, 2.0),
]
"""(what, the work, its target in seconds)."""


def best_of(work: Callable[[], None]) -> float:
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    print("| work | seconds (best of 3) | target | |")
    print("| --- | ---: | ---: | --- |")
    missed = 0
    for what, work, target in CASES:
        seconds = best_of(work)
        verdict = "PASS" if seconds <= target else "FAIL"
        missed += verdict == "FAIL"
        print(f"| {what} | {seconds:.3f} | ≤ {target:g} | {verdict} |")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
