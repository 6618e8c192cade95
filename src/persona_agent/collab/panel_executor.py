"""PanelExecutor: a panel (a persona with ``panel:``) answering as one A2A agent.

Its members answer as real A2A tasks of their own (:mod:`persona_agent.collab.meeting`),
durable and cancelable like any; the panel's task gathers their answers as artifacts, one
per turn, named after the member. Modes: ``broadcast`` (every member at once),
``round-table`` (in order, each seeing the answers before it, for ``rounds`` rounds) and
``moderated`` (the moderator gives the floor, then writes the ``synthesis``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from a2a.types.a2a_pb2 import Part

from persona_agent.a2a.extensions import COST_EXTENSION_URI, tree_cost
from persona_agent.a2a.input import DEFAULT_BUDGET
from persona_agent.a2a.tasks.executor import data_value
from persona_agent.a2a.tasks.lifecycle import TaskExecutor, TaskTurn
from persona_agent.chat.budget import BudgetLimits
from persona_agent.collab.local_calls import LocalCalls
from persona_agent.collab.meeting import Meeting
from persona_agent.collab.panel_prompts import Said, transcript
from persona_agent.knowledge.sent_documents import DocumentBudget
from persona_agent.observe.metrics import HubMetrics
from persona_agent.personas.model import Persona
from persona_agent.security.audit import AuditLog
from persona_agent.security.quotas import Quotas

__all__ = ["PANEL_DATA_KIND", "PanelExecutor"]

PANEL_DATA_KIND = "panel"
"""``kind`` of the data part of a panel's final message: every turn, with its task."""


class PanelExecutor(TaskExecutor):
    """Runs a panel's answers as A2A tasks; the task's life (checks, limits, span,
    metrics, failures, cancel, audit) is :class:`~persona_agent.a2a.tasks.lifecycle.TaskExecutor`'s,
    as for any persona.

    Its turn is the meeting: a ``working`` status as each member's task starts (its task
    id in a data part), each member's answer as an artifact of its own (streamed in
    chunks, or whole for a blocking send); it ends ``completed`` when every turn was
    answered (the answers, or a moderated panel's synthesis, as the final message), or
    ``failed`` naming each member that did not answer (the answers given stay the task's
    artifacts). A data part of the final message lists every turn: member, round, task
    id and state. A cancel cancels every member's task still running.
    """

    kind = "panel"

    def __init__(
        self,
        persona: Persona,
        calls: LocalCalls,
        lookup: Callable[[str], Persona | None],
        *,
        audit: AuditLog,
        quotas: Quotas,
        metrics: HubMetrics,
        budget: BudgetLimits,
        documents: DocumentBudget = DEFAULT_BUDGET,
        demo_model: bool = False,
    ) -> None:
        """``budget``: the calls one request may make, the members' included
        (:func:`~persona_agent.a2a.tasks.lifecycle.task_budget`); ``documents``: the tokens a
        message's documents may show the members; ``demo_model``: the members answer on
        the embedded demo model (the cost-v1 data says so, for clients to label)."""
        if persona.panel is None:
            raise ValueError(f"persona {persona.id} is not a panel")
        super().__init__(
            persona, audit=audit, quotas=quotas, metrics=metrics, budget=budget, documents=documents
        )
        self.calls = calls
        self.lookup = lookup
        self.demo_model = demo_model

    async def answer(self, turn: TaskTurn) -> str:
        """The panel's turns, then its final status (see the class)."""
        panel, settings = self.persona, self.persona.panel
        assert settings is not None
        asking = turn.chain[:-1]
        if panel.id in asking:
            reason = (
                f"The panel {panel.id} is already asking down this chain ({' → '.join(asking)})"
            )
            await turn.updater.failed(turn.updater.new_agent_message([Part(text=reason)]))
            return "failed"
        task_id = turn.task_id
        meeting = Meeting(
            panel,
            calls=self.calls,
            lookup=self.lookup,
            updater=turn.updater,
            origin=turn.origin,
            conversation=turn.conversation,
            chain=turn.chain,
            whole=turn.whole,
            stopped=lambda: self.is_canceled(task_id),
            budget=turn.budget,
        )
        synthesis: Said | None = None
        if settings.mode == "broadcast":
            await meeting.broadcast(turn.text)
        elif settings.mode == "round-table":
            await meeting.round_table(turn.text)
        else:
            synthesis = await meeting.moderated(turn.text)
        if self.is_canceled(task_id):
            return "canceled"
        return await self._close(meeting, synthesis, turn)

    async def _close(self, meeting: Meeting, synthesis: Said | None, turn: TaskTurn) -> str:
        """The panel's final status: the answers (or the synthesis) and every turn, or
        who did not answer."""
        updater, settings = turn.updater, self.persona.panel
        assert settings is not None
        turns = meeting.said
        failed = [said for said in turns if not said.ok]
        if synthesis is not None and not synthesis.ok:
            failed.append(synthesis)
        data: dict[str, Any] = {
            "kind": PANEL_DATA_KIND,
            "mode": settings.mode,
            "turns": [said.summary() for said in turns],
        }
        if synthesis is not None:
            data["synthesis"] = synthesis.summary()
        halted = meeting.halted
        if halted:
            data["halted"] = halted
        if failed or (halted and not any(said.ok for said in turns)):
            reason = "\n".join(line for line in (_failure(failed, turns), halted) if line)
            parts = [Part(text=reason), Part(data=data_value(data))]
            await updater.failed(updater.new_agent_message(parts))
            return "failed"
        text = synthesis.text if synthesis is not None else transcript(turns)
        if halted:
            text = f"{text}\n\n({halted}.)"
        cost = tree_cost(turn.budget, int((time.monotonic() - turn.started) * 1000))
        if self.demo_model:
            cost["demoModel"] = True
        final = updater.new_agent_message(
            [Part(text=text), Part(data=data_value(data)), Part(data=data_value(cost))]
        )
        final.extensions.append(COST_EXTENSION_URI)
        await updater.complete(final)
        return "completed"


def _failure(failed: list[Said], turns: list[Said]) -> str:
    """The final message of a panel some member failed: who, why, and who did answer."""
    lines = [f"{_turn_name(said)} did not answer: {said.state}: {said.text}" for said in failed]
    answered = sorted({said.name for said in turns if said.ok})
    if answered:
        lines.append(f"Answers given ({', '.join(answered)}) are the task's artifacts.")
    return "\n".join(lines)


def _turn_name(said: Said) -> str:
    name = f"{said.name} ({said.member})"
    if said.round == 0:
        return f"{name}, writing the synthesis,"
    return f"{name}, in round {said.round}," if said.round > 1 else name
