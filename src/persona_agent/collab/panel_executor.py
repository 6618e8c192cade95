"""PanelExecutor: a panel (a persona with ``panel:``) answering as one A2A agent.

Its members answer as real A2A tasks of their own (:mod:`persona_agent.collab.meeting`),
durable and cancelable like any; the panel's task gathers their answers as artifacts, one
per turn, named after the member. Modes: ``broadcast`` (every member at once),
``round-table`` (in order, each seeing the answers before it, for ``rounds`` rounds) and
``moderated`` (the moderator gives the floor, then writes the ``synthesis``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Part
from opentelemetry.trace import StatusCode

from persona_agent.a2a.context_keys import (
    CALLER_KEY,
    CONSULT_CHAIN_KEY,
    REQUEST_ID_KEY,
    WHOLE_ANSWER_STATE_KEY,
)
from persona_agent.a2a.executor import conversation_key, data_value, task_budget
from persona_agent.a2a.extensions import COST_EXTENSION_URI, tree_cost
from persona_agent.a2a.input import message_text
from persona_agent.a2a.lifecycle import TaskExecutor
from persona_agent.chat.budget import BudgetLimits, CallBudget
from persona_agent.collab.local_calls import LocalCalls
from persona_agent.collab.meeting import Meeting
from persona_agent.collab.panel_prompts import Said, transcript
from persona_agent.observe.logs import LOG_FIELDS, bind_log_fields
from persona_agent.observe.metrics import HubMetrics
from persona_agent.observe.tracing import TRACER
from persona_agent.personas.model import Persona
from persona_agent.security.audit import AuditLog
from persona_agent.security.quotas import Quotas

__all__ = ["PANEL_DATA_KIND", "PanelExecutor"]

logger = logging.getLogger(__name__)

PANEL_DATA_KIND = "panel"
"""``kind`` of the data part of a panel's final message: every turn, with its task."""
_CANCELED = "Canceled at the client's request"


class PanelExecutor(TaskExecutor):
    """Runs a panel's answers as A2A tasks.

    ``execute()`` emits ``working``, a ``working`` status as each member's task starts
    (its task id in a data part), each member's answer as an artifact of its own
    (streamed in chunks, or whole for a blocking send), and ends ``completed`` when every
    turn was answered (the answers, or a moderated panel's synthesis, as the final
    message), or ``failed`` naming each member that did not answer (the answers given
    stay the task's artifacts). A data part of the final message lists every turn:
    member, round, task id and state.

    ``cancel()`` emits ``canceled`` at once; the SDK then cancels ``execute()``, which
    cancels every member's task still running.
    """

    def __init__(
        self,
        persona: Persona,
        calls: LocalCalls,
        lookup: Callable[[str], Persona | None],
        *,
        audit: AuditLog | None = None,
        quotas: Quotas | None = None,
        metrics: HubMetrics | None = None,
        budget: BudgetLimits | None = None,
    ) -> None:
        """``budget``: the calls one request may make, the members' included
        (:func:`~persona_agent.a2a.executor.task_budget`)."""
        if persona.panel is None:
            raise ValueError(f"persona {persona.id} is not a panel")
        self.persona = persona
        self.calls = calls
        self.lookup = lookup
        self.audit = audit
        self.quotas = quotas
        self.metrics = metrics
        self.budget = budget if budget is not None else BudgetLimits()
        self.running: dict[str, ServerCallContext] = {}
        """Tasks being answered now, with the call context that started each."""
        self._cancelled: set[str] = set()
        self._updaters: dict[str, TaskUpdater] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        task_id, context_id = context.task_id, context.context_id
        if message is None or not task_id or not context_id:
            raise ValueError("execute() needs a message, a task id and a context id")
        if context.current_task is None:
            task = new_task_from_user_message(message)
            task.status.timestamp.GetCurrentTime()
            await event_queue.enqueue_event(task)
            self._audit("task.create", context.call_context, task_id, contextId=context_id)
        panel = self.persona
        updater = TaskUpdater(event_queue, task_id, context_id)
        self.running[task_id] = context.call_context
        self._updaters[task_id] = updater
        started, state = time.monotonic(), "interrupted"
        log_fields = bind_log_fields(persona=panel.id, task=task_id, context=context_id)
        running = self.metrics.tasks_running.labels(panel.id) if self.metrics else None
        if running is not None:
            running.inc()
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": panel.id,
            "gen_ai.agent.name": panel.name,
            "persona_agent.persona.id": panel.id,
            "a2a.task.id": task_id,
            "a2a.context.id": context_id,
        }
        with TRACER.start_as_current_span(
            f"invoke_agent {panel.id}", attributes=attributes
        ) as span:
            try:
                await updater.start_work()
                caller = context.call_context.state.get(CALLER_KEY)
                budget, nested = task_budget(context.call_context, panel, self.budget)
                question = await message_text(message)
                # Members' tasks are part of this request: it counts for the caller, once.
                if self.quotas is not None and caller:
                    with self.quotas.running(None if nested else caller, panel.id):
                        state = await self._meet(context, updater, question, budget)
                else:
                    state = await self._meet(context, updater, question, budget)
            except Exception as error:
                reference = uuid.uuid4().hex[:12]
                logger.exception("panel %s, task %s (reference %s)", panel.id, task_id, reference)
                state = "failed"
                span.record_exception(error)
                reason = f"Internal error while the panel met (reference {reference})"
                span.set_status(StatusCode.ERROR, reason)
                if task_id not in self._cancelled:
                    await updater.failed(updater.new_agent_message([Part(text=reason)]))
            finally:
                if task_id in self._cancelled:
                    state = "canceled"
                span.set_attribute("a2a.task.state", state)
                if self.metrics is not None and running is not None:
                    running.dec()
                    self.metrics.tasks.labels(panel.id, state).inc()
                    seconds = time.monotonic() - started
                    self.metrics.task_seconds.labels(panel.id, state).observe(seconds)
                self._cancelled.discard(task_id)
                self.running.pop(task_id, None)
                self._updaters.pop(task_id, None)
                LOG_FIELDS.reset(log_fields)

    async def _meet(
        self, context: RequestContext, updater: TaskUpdater, question: str, budget: CallBudget
    ) -> str:
        """The panel's turns, then its final status; the task's state."""
        started = time.monotonic()
        panel, settings = self.persona, self.persona.panel
        assert settings is not None
        call = context.call_context
        user = call.user
        owner = user.user_name if user.is_authenticated else ""
        chain: tuple[str, ...] = tuple(call.state.get(CONSULT_CHAIN_KEY, ()))
        if panel.id in chain:
            reason = f"The panel {panel.id} is already asking down this chain ({' → '.join(chain)})"
            await updater.failed(updater.new_agent_message([Part(text=reason)]))
            return "failed"
        task_id = updater.task_id
        meeting = Meeting(
            panel,
            calls=self.calls,
            lookup=self.lookup,
            updater=updater,
            origin=call,
            conversation=conversation_key(owner, updater.context_id),
            chain=(*chain, panel.id),
            whole=bool(call.state.get(WHOLE_ANSWER_STATE_KEY)),
            stopped=lambda: task_id in self._cancelled,
            budget=budget,
        )
        synthesis: Said | None = None
        if settings.mode == "broadcast":
            await meeting.broadcast(question)
        elif settings.mode == "round-table":
            await meeting.round_table(question)
        else:
            synthesis = await meeting.moderated(question)
        if task_id in self._cancelled:
            return "canceled"
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
        cost = tree_cost(budget, int((time.monotonic() - started) * 1000))
        final = updater.new_agent_message(
            [Part(text=text), Part(data=data_value(data)), Part(data=data_value(cost))]
        )
        final.extensions.append(COST_EXTENSION_URI)
        await updater.complete(final)
        return "completed"

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        if not task_id:
            return
        self._cancelled.add(task_id)
        self._audit("task.cancel", context.call_context, task_id)
        updater = TaskUpdater(event_queue, task_id, context_id or "")
        await updater.cancel(updater.new_agent_message([Part(text=_CANCELED)]))

    async def canceled_elsewhere(self, task_id: str) -> bool:
        """Stop a task another replica canceled (see
        :meth:`PersonaAgentExecutor.canceled_elsewhere`); whether it was running here."""
        updater = self._updaters.get(task_id)
        if updater is None or task_id in self._cancelled:
            return False
        self._cancelled.add(task_id)
        await updater.cancel(updater.new_agent_message([Part(text=_CANCELED)]))
        return True

    def _audit(self, action: str, call: ServerCallContext, task_id: str, **details: Any) -> None:
        if self.audit is None or not self.audit.enabled:
            return
        user = call.user
        self.audit.record(
            action,
            principal=user.user_name if user.is_authenticated else None,
            persona=self.persona.id,
            request_id=call.state.get(REQUEST_ID_KEY),
            taskId=task_id,
            **details,
        )


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
