"""One budget per request: the model calls and tool calls of a request's whole tree.

A request to a persona may fan out inside the hub: the model calls tools, consults other
personas (each a task of its own, with its own model calls and tools), or, for a panel,
asks members and a moderator. Every task of that tree shares one :class:`CallBudget`:
the root task's (the one the client asked for) is made from the hub's limits
(``PERSONA_AGENT_REQUEST_BUDGET_MODEL_CALLS`` / ``_TOOL_CALLS``) and the persona's own
(``limits.model_calls_per_request`` / ``tool_calls_per_request``, which may only lower
them); each task under it has a node of its own (:meth:`CallBudget.child`), which a
persona with a lower limit of its own bounds further, and every call counts against the
node and all its ancestors. So the root bounds the tree, and a nested persona cannot
raise what it may spend.

Each node also adds up what its subtree used (model calls, tool calls, tokens, price):
a task's cost-v1 is its node's, consultations and panel members included.

The engine (:class:`TurnCalls`) keeps one model call from the start of a turn for the
turn's last answer: when the budget is spent, that call is made without tools
(``tool_choice="none"``), as at the tool cap, so a turn ends with an answer rather than
a failure. A turn that cannot have even that one fails with :class:`BudgetSpentError`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from persona_agent.errors import BudgetSpentError
from persona_agent.llm.base import Usage

__all__ = ["BudgetLimits", "CallBudget", "TurnCalls"]


def _lower(limit: int, other: int | None) -> int:
    """The lower of two limits, 0 or ``None`` being none."""
    if not other:
        return limit
    return min(limit, other) if limit else other


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """Calls one request may make, its whole tree together; 0 is no limit."""

    model_calls: int = 0
    tool_calls: int = 0

    def lowered(self, model_calls: int | None, tool_calls: int | None) -> BudgetLimits:
        """These limits, each lowered to the other one given (``None``: unchanged)."""
        return BudgetLimits(
            _lower(self.model_calls, model_calls), _lower(self.tool_calls, tool_calls)
        )


class CallBudget:
    """One task's node of a request's budget; see the module docstring.

    Not thread-safe: the tasks of a request run on one event loop, and each check and
    count is done without an ``await`` between them.
    """

    def __init__(self, limits: BudgetLimits | None = None, parent: CallBudget | None = None):
        self.limits = limits if limits is not None else BudgetLimits()
        self.parent = parent
        self._taken = 0
        """Model calls taken in this subtree: made, or kept for a turn's last answer."""
        self.model_calls = 0
        """Model calls made in this subtree."""
        self.tool_calls = 0
        """Tool calls made in this subtree (MCP, outside agents, consultations)."""
        self.usage = Usage()
        self.models: set[str] = set()
        self._cost_usd = 0.0
        self._unpriced = 0

    def child(self, limits: BudgetLimits | None = None) -> CallBudget:
        """The node of a task started for this one; ``limits``: its own, if any."""
        return CallBudget(limits, self)

    def _chain(self) -> Iterator[CallBudget]:
        node: CallBudget | None = self
        while node is not None:
            yield node
            node = node.parent

    # -- model calls ---------------------------------------------------------------

    def take_model_call(self) -> bool:
        """Take one model call (counted against every node up to the root), or say no."""
        if self.model_calls_left() == 0:
            return False
        for node in self._chain():
            node._taken += 1
        return True

    def give_back_model_call(self) -> None:
        """A call taken and not made (a turn's kept call, unused)."""
        for node in self._chain():
            node._taken -= 1

    def model_calls_left(self) -> int | None:
        """Model calls the tree still allows this node; ``None``: no limit."""
        left = [n.limits.model_calls - n._taken for n in self._chain() if n.limits.model_calls]
        return max(0, min(left)) if left else None

    def model_call_refusal(self) -> str | None:
        """Why no model call can be made now (the budget is spent), or ``None``."""
        return self.spent_message("model") if self.model_calls_left() == 0 else None

    # -- tool calls ----------------------------------------------------------------

    def take_tool_call(self) -> str | None:
        """Take one tool call; or why not (the budget is spent), for the model to read."""
        if self.tool_calls_left() == 0:
            return self.spent_message("tool")
        for node in self._chain():
            node.tool_calls += 1
        return None

    def tool_calls_left(self) -> int | None:
        left = [n.limits.tool_calls - n.tool_calls for n in self._chain() if n.limits.tool_calls]
        return max(0, min(left)) if left else None

    def limit(self, kind: str) -> int:
        """The limit of ``kind`` (``model`` or ``tool``) calls that binds this node now:
        the one with the fewest calls left, up to the root (0: none)."""
        tightest, least = 0, None
        for node in self._chain():
            limit = node.limits.model_calls if kind == "model" else node.limits.tool_calls
            if not limit:
                continue
            left = limit - (node._taken if kind == "model" else node.tool_calls)
            if least is None or left < least:
                tightest, least = limit, left
        return tightest

    def spent_message(self, kind: str) -> str:
        """``The budget of N {kind} calls for this request is spent``."""
        return f"The budget of {self.limit(kind)} {kind} calls for this request is spent"

    # -- what was used -------------------------------------------------------------

    def record(self, model: str, usage: Usage, cost_usd: float | None) -> None:
        """A model call made: its tokens and price (``None``: the model has none)."""
        for node in self._chain():
            node.model_calls += 1
            node.usage += usage
            node.models.add(model)
            if cost_usd is None:
                node._unpriced += 1
            else:
                node._cost_usd += cost_usd

    @property
    def cost_usd(self) -> float | None:
        """What the subtree's model calls cost; ``None`` if one had no price, or none was
        made."""
        return self._cost_usd if self.model_calls and not self._unpriced else None


class TurnCalls:
    """The model and tool calls of one turn of the engine against ``budget`` (none: no
    limit, nothing counted). An async context manager beside the conversation's lock.

    Entering keeps one model call for the turn's last answer; leaving gives it back if it
    was not made.

    Raises:
        BudgetSpentError: on entering, when the budget has no model call left.
    """

    def __init__(self, budget: CallBudget | None) -> None:
        self.budget = budget
        self._kept = False

    async def __aenter__(self) -> TurnCalls:
        budget = self.budget
        if budget is not None:
            if not budget.take_model_call():
                raise BudgetSpentError(budget.spent_message("model"))
            self._kept = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._kept and self.budget is not None:
            self._kept = False
            self.budget.give_back_model_call()

    def is_last(self, at_cap: bool) -> bool:
        """Before a model call: whether it must be the turn's last (``at_cap``: the tool
        cap says so; else the budget does, when it has no call left beyond the one kept,
        or no tool call at all). The last call is the kept one."""
        budget = self.budget
        if budget is None or not self._kept:
            return at_cap
        if at_cap or budget.tool_calls_left() == 0 or not budget.take_model_call():
            self._kept = False  # this call is the kept one
            return True
        return False

    def take_tool(self) -> str | None:
        """Take a tool call; or why not, for the model."""
        return None if self.budget is None else self.budget.take_tool_call()

    def record(self, model: str, usage: Usage, cost_usd: float | None) -> None:
        if self.budget is not None:
            self.budget.record(model, usage, cost_usd)
