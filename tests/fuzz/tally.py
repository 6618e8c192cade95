"""The fuzz suite's counts: cases tried and failures per operation, printed after the run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TALLY", "Case", "Count", "Tally"]


@dataclass
class Count:
    """One operation's cases: how many were sent, how many failed a check, and the
    status codes of the answers."""

    cases: int = 0
    failures: int = 0
    statuses: Counter[int] = field(default_factory=Counter)


@dataclass
class Case:
    """The case being sent: its answer's status, once known."""

    status: int | None = None


class Tally:
    """Counts by (suite, operation), in the order operations were first seen."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], Count] = {}

    @contextmanager
    def case(self, suite: str, operation: str) -> Iterator[Case]:
        """Count one case; a check that raises inside counts it as a failure (and the
        error goes on to Hypothesis, which reports and shrinks it)."""
        count = self.counts.setdefault((suite, operation), Count())
        current = Case()
        count.cases += 1
        try:
            yield current
        except BaseException:
            count.failures += 1
            raise
        finally:
            if current.status is not None:
                count.statuses[current.status] += 1

    def dump(self) -> list[list[object]]:
        """The counts as plain lists (a pytest-xdist worker hands them to the controller)."""
        return [
            [suite, operation, count.cases, count.failures, sorted(count.statuses.items())]
            for (suite, operation), count in self.counts.items()
        ]

    def merge(self, dumped: list[list[Any]]) -> None:
        """Add the counts of another tally's :meth:`dump` (a worker's) to this one."""
        for suite, operation, cases, failures, statuses in dumped:
            count = self.counts.setdefault((str(suite), str(operation)), Count())
            count.cases += int(cases)
            count.failures += int(failures)
            for status, n in statuses:
                count.statuses[int(status)] += int(n)

    def lines(self) -> list[str]:
        """The table printed at the end of the run, with a total."""
        if not self.counts:
            return []
        width = max(len(f"{suite} {operation}") for suite, operation in self.counts)
        lines = [f"{'suite / operation':<{width}}  {'cases':>6}  {'fail':>5}  statuses"]
        for (suite, operation), count in self.counts.items():
            statuses = " ".join(
                f"{status}×{n}" for status, n in sorted(count.statuses.items(), key=_order)
            )
            name = f"{suite} {operation}"
            lines.append(f"{name:<{width}}  {count.cases:>6}  {count.failures:>5}  {statuses}")
        cases = sum(count.cases for count in self.counts.values())
        failures = sum(count.failures for count in self.counts.values())
        lines.append(f"{'total':<{width}}  {cases:>6}  {failures:>5}")
        return lines


def _order(item: tuple[int, int]) -> int:
    return item[0]


TALLY = Tally()
"""The process's tally; under pytest-xdist each worker's is merged into the controller's,
which prints it (tests/conftest.py)."""
