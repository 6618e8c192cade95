"""Metrics that are off: the same instruments as metrics that are on, each doing nothing,
at no allocation (the A2A request path calls them as it would real ones)."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from itertools import repeat

from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.observe.usage import Usage


def instruments(metrics: HubMetrics) -> set[str]:
    return {name for name, value in vars(metrics).items() if hasattr(value, "labels")}


def test_metrics_that_are_off_have_every_instrument_and_count_nothing() -> None:
    on, off = HubMetrics(), HubMetrics.disabled()
    assert (on.enabled, off.enabled, NO_METRICS.enabled) == (True, False, False)
    assert instruments(off) == instruments(on)
    assert len(instruments(on)) == 23
    off.requests.labels("socrates", "SendMessage", "jsonrpc", "ok").inc()
    off.open_streams.labels("socrates").inc()
    off.open_streams.labels("socrates").dec()
    off.remote_breaker.labels("echo").set(2)
    off.task_seconds.labels("socrates", "completed").observe(0.5)
    off.db_commit_seconds.observe(0.001)
    off.llm_call("gpt-4o-mini", Usage(prompt_tokens=3, completion_tokens=5), failed=False)
    off.count_personas(lambda: 1 // 0)  # never called
    off.set_replica("replica-1")
    assert b"persona_agent" not in off.exposition()
    assert b"persona_agent_info" in on.exposition()


def memory(calls: Callable[[], None]) -> tuple[int, int]:
    """The memory 10,000 rounds of ``calls`` kept, and the most they held at once (bytes).

    tracemalloc counts every thread's memory: a thread an earlier test of this process left (a
    server's, idle) may wake meanwhile. The rounds are pure Python and never wait, so with a
    switch interval longer than they take no other thread runs Python while they do.
    """
    calls()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(60.0)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        for _ in repeat(None, 10_000):  # no int made a round
            calls()
        end, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        sys.setswitchinterval(interval)
    return end - start, peak - start


def test_a_call_to_an_instrument_that_is_off_asks_no_memory() -> None:
    off, persona = HubMetrics.disabled(), "socrates"

    def task() -> None:  # what a task does with the metrics, on its way through the hub
        running = off.tasks_running.labels(persona)
        running.inc()
        running.dec()
        off.tasks.labels(persona, "completed").inc()
        off.task_seconds.labels(persona, "completed").observe(0.25)
        off.requests.labels(persona, "SendMessage", "jsonrpc", "ok").inc()

    def nothing() -> None:
        pass

    # As much as calling a function that does nothing (tracemalloc's own bookkeeping). The
    # least of three tries: a thread that held the GIL before the rounds began may still
    # finish its step in the first (see `memory`).
    assert min(memory(task) for _ in range(3)) == min(memory(nothing) for _ in range(3))
