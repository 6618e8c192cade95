"""How much the fuzz suite tries, and how it is made reproducible: examples, seed, deadline.

Read once, at import: the test environment is cleaned of ``PERSONA_AGENT_*`` variables
before each test (tests/conftest.py), so a variable set for the run is read here first.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

__all__ = ["DEADLINE", "EXAMPLES", "EXAMPLES_VARIABLE", "SEED", "SEED_VARIABLE", "fuzz_settings"]

EXAMPLES_VARIABLE = "PERSONA_AGENT_FUZZ_EXAMPLES"
SEED_VARIABLE = "PERSONA_AGENT_FUZZ_SEED"


def _whole(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected a whole number") from None
    if value < minimum:
        raise ValueError(f"{name}={value}: expected {minimum} or more")
    return value


EXAMPLES = _whole(EXAMPLES_VARIABLE, 20, 1)
"""Hypothesis examples per fuzz test (one REST operation, one kind of A2A request);
20 keeps the whole suite near a minute on two cores. Raise it for a longer hunt."""

SEED = _whole(SEED_VARIABLE, 32, 0)
"""The seed of every fuzz test: the same run, case for case, until it is changed."""

DEADLINE = 60.0
"""Seconds within which every request must be answered in full, streams included: a hang
guard, not a timing (the fake LLM answers at once, so a request that needs this long is
hanging; a busy two-core machine takes seconds for some)."""


def fuzz_settings(scale: float = 1.0) -> settings:
    """Hypothesis settings of a fuzz test running ``scale`` × :data:`EXAMPLES` examples:
    no example database and a fixed seed (applied with ``@seed``), so a failure seen in CI
    is the one seen at home; no per-example time limit (:data:`DEADLINE` bounds each
    request instead)."""
    return settings(
        max_examples=max(1, round(EXAMPLES * scale)),
        deadline=None,
        database=None,
        print_blob=True,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
            HealthCheck.large_base_example,
        ],
    )
