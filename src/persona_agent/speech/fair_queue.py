"""What waits to be spoken, taken caller by caller in turn: a caller's sentences wait
behind its own, never behind every other caller's.

One line of jobs a caller, in the order they came; :meth:`FairQueue.take` serves the
caller at the head, then sends it to the back if it has more. A caller with one answer
being spoken (one sentence waiting at a time) is served every other sentence beside a
caller with four, not one in five.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Generic, TypeVar

__all__ = ["FairQueue"]

_T = TypeVar("_T")


class FairQueue(Generic[_T]):
    """Jobs by caller, taken round-robin across callers, first in first out within one."""

    def __init__(self) -> None:
        self._lines: OrderedDict[str, deque[_T]] = OrderedDict()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def put(self, caller: str, job: _T) -> None:
        """``job`` at the end of ``caller``'s line (a caller new to the queue at the back)."""
        line = self._lines.get(caller)
        if line is None:
            line = self._lines[caller] = deque()
        line.append(job)
        self._count += 1

    def take(self) -> tuple[str, _T] | None:
        """The next job and its caller: the first of the caller at the head, which then
        goes to the back (if it has more); ``None`` when nothing waits."""
        if not self._lines:
            return None
        caller, line = next(iter(self._lines.items()))
        job = line.popleft()
        self._count -= 1
        if line:
            self._lines.move_to_end(caller)
        else:
            del self._lines[caller]
        return caller, job

    def remove(self, caller: str, job: _T) -> bool:
        """Take ``job`` out (its caller gave up waiting); whether it was waiting."""
        line = self._lines.get(caller)
        if line is None or job not in line:
            return False
        line.remove(job)
        self._count -= 1
        if not line:
            del self._lines[caller]
        return True

    def drain(self) -> list[_T]:
        """Every job waiting, the queue left empty."""
        jobs = [job for line in self._lines.values() for job in line]
        self._lines.clear()
        self._count = 0
        return jobs
