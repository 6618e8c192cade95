"""The request budget's tree: every node's calls count up to the root; a node's own limit
bounds its subtree and never raises the root's; a turn keeps one call for its last answer."""

from __future__ import annotations

import pytest

from persona_agent.chat.budget import BudgetLimits, CallBudget, TurnCalls
from persona_agent.errors import BudgetSpentError
from persona_agent.llm.base import Usage


def test_the_tree_shares_the_roots_limit_and_adds_up_what_it_used() -> None:
    root = CallBudget(BudgetLimits(model_calls=3, tool_calls=2))
    child = root.child(BudgetLimits(model_calls=100))  # cannot raise the root's 3
    assert [child.take_model_call(), root.take_model_call(), child.take_model_call()] == [True] * 3
    assert not child.take_model_call()
    assert not root.take_model_call()
    assert child.spent_message("model") == "The budget of 3 model calls for this request is spent"
    assert [child.take_tool_call(), root.take_tool_call()] == [None, None]
    assert child.take_tool_call() == "The budget of 2 tool calls for this request is spent"
    child.record("m1", Usage(10, 2), 0.5)
    root.record("m2", Usage(5, 1), None)
    assert (child.model_calls, child.tool_calls, child.usage) == (1, 1, Usage(10, 2))
    assert (root.model_calls, root.tool_calls, root.usage) == (2, 2, Usage(15, 3))
    assert child.cost_usd == 0.5
    assert root.cost_usd is None  # one call had no price
    assert root.models == {"m1", "m2"}


def test_a_nodes_own_limit_bounds_its_subtree_only() -> None:
    root = CallBudget(BudgetLimits(model_calls=10))
    lean = root.child(BudgetLimits(model_calls=1))
    assert lean.take_model_call()
    assert lean.model_call_refusal() == "The budget of 1 model calls for this request is spent"
    assert root.model_calls_left() == 9
    assert CallBudget().model_calls_left() is None  # no limit
    assert BudgetLimits(5, 0).lowered(None, 3) == BudgetLimits(5, 3)
    assert BudgetLimits(5, 7).lowered(9, 2) == BudgetLimits(5, 2)


async def test_a_turn_keeps_its_last_call_and_gives_it_back_unused() -> None:
    budget = CallBudget(BudgetLimits(model_calls=2))
    async with TurnCalls(budget) as calls:
        assert budget.model_calls_left() == 1  # one kept for the last answer
        assert calls.is_last(at_cap=False) is False  # a call with tools: one more taken
        assert budget.model_calls_left() == 0
        assert calls.is_last(at_cap=False) is True  # nothing left: the kept call, no tools
    assert budget.model_calls_left() == 0
    again = CallBudget(BudgetLimits(model_calls=2))
    async with TurnCalls(again) as calls:
        assert calls.is_last(at_cap=False) is False
    assert again.model_calls_left() == 1  # the kept call, unused, came back
    with pytest.raises(BudgetSpentError, match="budget of 2 model calls"):
        async with TurnCalls(budget):
            pass
