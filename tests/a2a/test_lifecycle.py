"""The executors share one task lifecycle: each writes its own turn, nothing else."""

from __future__ import annotations

import pytest

from persona_agent.a2a.tasks.executor import PersonaAgentExecutor
from persona_agent.a2a.tasks.lifecycle import TaskExecutor
from persona_agent.collab.panel_executor import PanelExecutor

LIFECYCLE = ["execute", "cancel", "canceled_elsewhere", "_audit"]
"""What every task does, whatever answers it: the base's alone."""


@pytest.mark.parametrize("executor", [PersonaAgentExecutor, PanelExecutor])
def test_an_executor_writes_its_turn_and_inherits_the_rest(executor: type[TaskExecutor]) -> None:
    assert issubclass(executor, TaskExecutor)
    own = vars(executor)
    assert "answer" in own
    assert [name for name in LIFECYCLE if name in own] == []
    for name in LIFECYCLE:
        assert getattr(executor, name) is getattr(TaskExecutor, name)
