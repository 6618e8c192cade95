"""The tests keep time out of their assertions (README.md, Development; issue 53): no
assertion bounds a wall-clock duration by a number, and no wait on an event is bounded
by a few seconds, so that a busy machine makes the suite slower, never red.

An AST scan of tests/: it flags an ``assert`` comparing a clock reading (``monotonic()``,
``perf_counter()``, ``time.time()``, ``loop.time()``, or a name such as ``elapsed`` or
``took``) with a number written in the test, and an ``asyncio.timeout(N)``,
``asyncio.timeout_at(...)`` or ``asyncio.wait_for(..., N)`` whose N is under
:data:`LEAST_BOUND` seconds. Seconds belong in bench/; a bound is a safety net.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
LEAST_BOUND = 30.0
"""Seconds below which a literal bound on a wait is taken for a timing, not a safety net."""
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns"}
CLOCK_NAMES = {"elapsed", "took", "took_s", "elapsed_s", "duration_s", "wall"}


def _is_clock(node: ast.AST) -> bool:
    """Whether ``node`` reads a clock (or holds what was read: ``elapsed``, ``took``)."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and not inner.args and _named(inner.func) in CLOCKS:
            return True
        if isinstance(inner, ast.Name) and inner.id in CLOCK_NAMES:
            return True
    return False


def _named(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else ""


def _is_number(node: ast.AST) -> bool:
    """A number written out (``5``, ``0.5 * 2``, ``-1``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left) and _is_number(node.right)
    return False


def _literal_seconds(node: ast.AST | None) -> float | None:
    if node is not None and _is_number(node):
        value = ast.literal_eval(ast.unparse(node))
        return float(value)
    return None


def _timed_asserts(tree: ast.AST) -> Iterator[ast.Compare]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in ast.walk(node.test):
            if not isinstance(compare, ast.Compare):
                continue
            sides = [compare.left, *compare.comparators]
            if any(map(_is_clock, sides)) and any(map(_is_number, sides)):
                yield compare


def _short_waits(tree: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        if not (isinstance(owner, ast.Name) and owner.id == "asyncio"):
            continue
        if node.func.attr == "timeout_at":
            yield node  # a deadline of the clock's: a timing
        elif node.func.attr == "timeout":
            bound = _literal_seconds(node.args[0] if node.args else None)
            if bound is not None and bound < LEAST_BOUND:
                yield node
        elif node.func.attr == "wait_for":
            given = node.args[1] if len(node.args) > 1 else None
            given = next((k.value for k in node.keywords if k.arg == "timeout"), given)
            bound = _literal_seconds(given)
            if bound is not None and bound < LEAST_BOUND:
                yield node


def _findings() -> list[str]:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(TESTS.parent)
        for compare in _timed_asserts(tree):
            found.append(f"{where}:{compare.lineno}: a duration asserted: {ast.unparse(compare)}")
        for call in _short_waits(tree):
            found.append(f"{where}:{call.lineno}: a short bound on a wait: {ast.unparse(call)}")
    return found


def test_no_assertion_bounds_a_duration_and_no_wait_is_bounded_by_a_few_seconds() -> None:
    assert _findings() == [], (
        "time belongs in bench/, not in the tests (README.md, Development): assert what "
        "happened (events, counts, states), and bound waits generously"
    )


def test_the_scan_finds_what_it_is_for() -> None:
    samples = {
        "assert time.monotonic() - start < 5": 1,
        "assert elapsed <= 1.0": 1,
        "assert 2.0 < took": 1,
        "assert loop.time() - started < 0.5 * 2": 1,
        "assert elapsed <= DEADLINE": 0,  # a named bound: a hang guard's
        "assert len(pieces) <= took / INTERVAL + 2": 0,  # a count, bounded by the time taken
        "assert heard.seconds < 8.0": 0,  # seconds of audio, not of the clock
        "async def f():\n    async with asyncio.timeout(5):\n        pass": 1,
        "async def f():\n    async with asyncio.timeout(60):\n        pass": 0,
        "async def f():\n    async with asyncio.timeout_at(deadline):\n        pass": 1,
        "async def f():\n    await asyncio.wait_for(x, 10)": 1,
        "async def f():\n    await asyncio.wait_for(x, timeout=0.5)": 1,
        "async def f():\n    await asyncio.wait_for(x, WAIT)": 0,
    }
    for source, expected in samples.items():
        tree = ast.parse(source)
        assert len([*_timed_asserts(tree), *_short_waits(tree)]) == expected, source
