"""The circuit breaker's states, on a clock the test moves."""

from __future__ import annotations

import pytest

from persona_agent.collab.breaker import BreakerOpenError, BreakerState, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Changes(list[tuple[BreakerState, BreakerState]]):
    pass


def state(b: CircuitBreaker) -> BreakerState:
    """Read afresh each time (the clock moves it; mypy would keep a narrowed one)."""
    return b.state


def breaker(clock: Clock, changes: Changes) -> CircuitBreaker:
    return CircuitBreaker(3, 30, clock=clock, on_change=lambda old, new: changes.append((old, new)))


def test_opens_after_consecutive_failures_only() -> None:
    clock, changes = Clock(), Changes()
    b = breaker(clock, changes)
    for _ in range(2):
        b.acquire()
        b.failure()
    b.acquire()
    b.success()  # a success starts the count again
    for _ in range(2):
        b.acquire()
        b.failure()
    assert state(b) == "closed"
    b.acquire()
    b.failure()
    assert state(b) == "open"
    assert changes == [("closed", "open")]
    with pytest.raises(BreakerOpenError) as refused:
        b.acquire()
    assert refused.value.retry_in == 30
    assert refused.value.failures == 3


def test_half_opens_after_the_cool_down_with_one_trial() -> None:
    clock, changes = Clock(), Changes()
    b = breaker(clock, changes)
    for _ in range(3):
        b.acquire()
        b.failure()
    clock.now += 29.5
    assert b.retry_in() == pytest.approx(0.5)
    with pytest.raises(BreakerOpenError):
        b.acquire()
    clock.now += 0.5
    assert state(b) == "half-open"
    b.acquire()  # the trial
    with pytest.raises(BreakerOpenError) as second:
        b.acquire()  # another call while the trial runs
    assert second.value.retry_in == 0
    b.success()
    assert state(b) == "closed"
    b.acquire()
    assert changes == [("closed", "open"), ("open", "half-open"), ("half-open", "closed")]


def test_a_failed_trial_opens_it_again_for_a_whole_cool_down() -> None:
    clock, changes = Clock(), Changes()
    b = breaker(clock, changes)
    for _ in range(3):
        b.acquire()
        b.failure()
    clock.now += 30
    b.acquire()
    b.failure()
    assert state(b) == "open"
    assert b.retry_in() == 30
    clock.now += 30
    b.acquire()
    b.release()  # the trial ended with no word on the agent's health
    b.acquire()  # so the next call is the trial
    b.success()
    assert state(b) == "closed"
    assert [new for _, new in changes] == ["open", "half-open", "open", "half-open", "closed"]
