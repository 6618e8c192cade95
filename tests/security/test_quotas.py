"""Quotas with no limits: always present (the executors count every task through them),
refusing nothing."""

from __future__ import annotations

from persona_agent.security.quotas import Quotas


def test_quotas_with_no_limits_count_running_tasks_and_refuse_nothing() -> None:
    quotas = Quotas()
    for _ in range(1000):
        quotas.check_rate("ip:203.0.113.7", quotas.limits.requests_per_minute)
    with quotas.running("key:alice", "socrates"):
        quotas.check_start("key:alice", "socrates")
        assert quotas.running_tasks("key:alice") == 1
        with quotas.running(None, "socrates"):  # a consultation: for its persona only
            assert quotas.running_tasks("key:alice") == 1
    assert quotas.running_tasks("key:alice") == 0
    assert quotas._running == quotas._running_persona == {}  # nothing left behind
