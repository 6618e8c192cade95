"""Every fenced block of README.md and docs/*.md is run or checked by a doc test, or
listed in not_run.py with the reason it is not: a new block that is neither fails here,
so no snippet can rot unseen."""

from __future__ import annotations

import importlib
import pkgutil

import tests.docs
from tests.docs.not_run import NOT_RUN, NOT_RUN_COMMANDS, RUN_ELSEWHERE
from tests.docs.snippets import REPO, Snippet, all_snippets, claimed, find

MOST_NOT_RUN = 12
"""The list of blocks not run stays short."""


def _claims() -> dict[Snippet, list[str]]:
    for module in pkgutil.iter_modules(tests.docs.__path__):
        if module.name.startswith("test_"):
            importlib.import_module(f"tests.docs.{module.name}")
    return claimed()


def test_every_block_is_run_by_a_test_or_listed_with_a_reason() -> None:
    claims = _claims()
    listed = {find(path, text): why for (path, text), why in NOT_RUN.items()}
    elsewhere = {find(path, text): test for (path, text), test in RUN_ELSEWHERE.items()}
    uncovered = [
        str(s) for s in all_snippets() if s not in claims and s not in listed and s not in elsewhere
    ]
    assert not uncovered, (
        "code blocks no doc test runs: run each in a test of tests/docs (claim it), or list "
        "it in tests/docs/not_run.py with the reason it cannot run:\n  " + "\n  ".join(uncovered)
    )
    both = [str(s) for s in listed if s in claims or s in elsewhere]
    assert not both, f"listed as not run, yet run: {both}"


def test_the_blocks_not_run_are_few_and_each_has_a_reason() -> None:
    assert len(NOT_RUN) <= MOST_NOT_RUN
    assert all(why.strip() for why in (*NOT_RUN.values(), *NOT_RUN_COMMANDS.values()))


def test_the_blocks_run_elsewhere_are_run_there() -> None:
    for (path, text), test in RUN_ELSEWHERE.items():
        find(path, text)  # the block is still there
        assert path in (REPO / test).read_text(encoding="utf-8"), f"{test} reads no {path}"
