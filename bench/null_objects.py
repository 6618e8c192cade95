"""What the hub's always-present parts cost on the A2A request path (issue 33): metrics
that are off (null instruments, where a check for ``None`` stood), the quotas' count of
running tasks, and a layer of the chat engine's steps. Micro-benchmarks with ``timeit``
(best of 9), in nanoseconds, printed as a Markdown table; about a minute on 2 cores.

    uv run python bench/null_objects.py
"""

from __future__ import annotations

import asyncio
import timeit
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import aclosing, contextmanager
from types import SimpleNamespace
from typing import Any

from persona_agent.observe.metrics import HubMetrics
from persona_agent.security.quotas import Quotas

PERSONA, STATE = "socrates", "completed"
N = 1_000_000

before = SimpleNamespace(metrics=None)
"""An executor as it was with metrics off: ``metrics`` None, checked at each use."""
after = SimpleNamespace(metrics=HubMetrics.disabled())
"""An executor now, with metrics off."""
on = SimpleNamespace(metrics=HubMetrics())


def task_before() -> None:
    """What the persona executor did with its metrics, a task, with ``metrics`` None."""
    metrics = before.metrics
    running = metrics.tasks_running.labels(PERSONA) if metrics else None
    if running is not None:
        running.inc()
    first_text = metrics.first_text_seconds.labels(PERSONA) if metrics else None
    if first_text is not None:
        first_text.observe(0.1)
    if metrics is not None and running is not None:
        running.dec()


def task_after(executor: Any = after) -> None:
    """What the task lifecycle and the persona executor do with the metrics, a task."""
    metrics = executor.metrics
    running = metrics.tasks_running.labels(PERSONA)
    running.inc()
    metrics.first_text_seconds.labels(PERSONA).observe(0.1)
    running.dec()
    metrics.tasks.labels(PERSONA, STATE).inc()
    metrics.task_seconds.labels(PERSONA, STATE).observe(0.5)


@contextmanager
def running_as_generator(counts: dict[str, int], caller: str) -> Iterator[None]:
    """The form ``Quotas.running`` had: a generator context manager."""
    counts[caller] = counts.get(caller, 0) + 1
    try:
        yield
    finally:
        counts[caller] -= 1


def nanoseconds(statement: str, number: int = N) -> float:
    times = timeit.repeat(statement, globals=globals(), number=number, repeat=9)
    return min(times) / number * 1e9


async def _source(count: int) -> AsyncGenerator[int]:
    for item in range(count):
        yield item


async def _relay(inner: AsyncGenerator[int]) -> AsyncIterator[int]:
    async with aclosing(inner) as items:
        async for item in items:
            yield item


def per_item(layers: int, count: int = 200_000) -> float:
    """Nanoseconds an item takes through ``layers`` relaying async generators."""

    async def drain() -> None:
        items: AsyncIterator[int] = _source(count)
        for _ in range(layers):
            items = _relay(items)  # type: ignore[arg-type]
        async for _ in items:
            pass

    times = timeit.repeat(lambda: asyncio.run(drain()), number=1, repeat=5)
    return min(times) / count * 1e9


def main() -> None:
    quotas, counts = Quotas(), {"ip:127.0.0.1": 0}
    globals().update(quotas=quotas, counts=counts)
    loop = nanoseconds("pass")
    few = N // 10
    rows = [
        ("a check: `if metrics is not None:` (None)", "if before.metrics is not None: pass", N),
        (
            "a null call: `metrics.tasks.labels(p, s).inc()`",
            "after.metrics.tasks.labels(PERSONA, STATE).inc()",
            N,
        ),
        (
            "a null call, no labels: `db_commit_seconds.observe(x)`",
            "after.metrics.db_commit_seconds.observe(0.5)",
            N,
        ),
        ("a task's metrics, as they were (checks, metrics None)", "task_before()", N),
        ("a task's metrics, off (null instruments)", "task_after()", N),
        ("a task's metrics, on (Prometheus, for scale)", "task_after(on)", few),
        ("`Quotas.check_rate(caller, 0)` (no limit)", "quotas.check_rate('ip:127.0.0.1', 0)", N),
        (
            "a task's running count, as it was (a generator)",
            "with running_as_generator(counts, 'ip:127.0.0.1'): pass",
            few,
        ),
        (
            "a task's running count, now (`Quotas.running`)",
            "with quotas.running('ip:127.0.0.1', PERSONA): pass",
            few,
        ),
    ]
    print("| what | ns |\n| --- | --- |")
    for name, statement, number in rows:
        print(f"| {name} | {nanoseconds(statement, number) - loop:,.0f} |")
    layer = per_item(2) - per_item(1)
    print(f"| an async-generator layer more, a text chunk (the engine's steps) | {layer:,.0f} |")


if __name__ == "__main__":
    main()
