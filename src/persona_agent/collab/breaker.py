"""A circuit breaker: stop calling an agent that keeps failing, and try it again later.

``closed`` (calls go through) → ``open`` after ``threshold`` consecutive failures (calls
are refused at once) → ``half-open`` when ``cool_down`` seconds have passed (one trial call
goes through, others are still refused) → ``closed`` when the trial succeeds, or ``open``
again, for another cool-down, when it fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

__all__ = ["BreakerOpenError", "BreakerState", "CircuitBreaker"]

BreakerState = Literal["closed", "open", "half-open"]


class BreakerOpenError(Exception):
    """A call refused by an open breaker; ``retry_in``: seconds until a trial call may go
    (0 while another call is the trial)."""

    def __init__(self, retry_in: float, failures: int) -> None:
        super().__init__(f"circuit open for {retry_in:.0f} s more")
        self.retry_in = retry_in
        self.failures = failures


class CircuitBreaker:
    """One agent's breaker. Not thread-safe: one event loop calls it, and it never awaits.

    Each call is ``acquire()``, then ``success()`` or ``failure()``; a call that ends
    neither way (cancelled, or refused for a reason that says nothing of the agent's
    health) calls ``release()``, so a half-open breaker lets the next call be its trial.
    ``on_change(old, new)`` is told of every change of state.
    """

    def __init__(
        self,
        threshold: int,
        cool_down: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[BreakerState, BreakerState], None] | None = None,
    ) -> None:
        if threshold < 1 or cool_down < 0:
            raise ValueError("threshold must be at least 1 and cool_down at least 0")
        self.threshold = threshold
        self.cool_down = cool_down
        self._clock = clock
        self._on_change = on_change
        self._state: BreakerState = "closed"
        self.failures = 0
        """Consecutive failures so far."""
        self._opened_at = 0.0
        self._trial = False

    @property
    def state(self) -> BreakerState:
        """The state now (an open breaker whose cool-down has passed reads ``half-open``)."""
        if self._state == "open" and self._clock() >= self._opened_at + self.cool_down:
            self._set("half-open")
        return self._state

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a trial call through (0 when not open)."""
        if self.state != "open":
            return 0.0
        return max(0.0, self._opened_at + self.cool_down - self._clock())

    def acquire(self) -> None:
        """Let a call through, or refuse it.

        Raises:
            BreakerOpenError: the breaker is open, or half-open with its trial under way.
        """
        state = self.state
        if state == "closed":
            return
        if state == "half-open" and not self._trial:
            self._trial = True
            return
        raise BreakerOpenError(self.retry_in(), self.failures)

    def success(self) -> None:
        """The call succeeded: the breaker closes and the count starts again."""
        self.failures = 0
        self._trial = False
        self._set("closed")

    def failure(self) -> None:
        """The call failed: counted; the breaker opens at the threshold, or at once when the
        call was a half-open trial."""
        self.failures += 1
        was_trial, self._trial = self._trial, False
        if was_trial or self.failures >= self.threshold:
            self._opened_at = self._clock()
            self._set("open")

    def release(self) -> None:
        """The call ended with no word on the agent's health."""
        self._trial = False

    def _set(self, state: BreakerState) -> None:
        old, self._state = self._state, state
        if old != state and self._on_change is not None:
            self._on_change(old, state)
