"""README.md's busy CI machine (issue 53), checked without running it: one busy loop per
core, each ended by ``timeout``, beside a pytest run of test modules that exist. Running
it would keep both cores busy for minutes under every other test."""

from __future__ import annotations

import shlex

from tests.docs.snippets import REPO, claim, commands

BUSY = claim("README.md", "timeout 900 python3 -c 'while True: pass'")


def test_the_busy_loops_are_one_a_core_and_end_by_themselves() -> None:
    loops, _ = commands(BUSY)
    assert loops.startswith("for i in 1 2; do timeout ")  # two cores, as CI's machine
    assert "python3 -c 'while True: pass' &" in loops
    assert int(loops.split("timeout ")[1].split()[0]) <= 900  # they stop by themselves


def test_the_run_beside_them_names_test_modules_that_exist() -> None:
    _, run = commands(BUSY)
    words = shlex.split(run)
    assert words[:3] == ["uv", "run", "pytest"]
    modules = [word for word in words if word.endswith(".py")]
    assert modules
    assert all((REPO / module).is_file() for module in modules), modules
