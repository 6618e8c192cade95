"""PersonaAgentExecutor: the boundary between the A2A protocol and the chat engine."""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import aclosing
from typing import Any
from urllib.parse import quote

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Artifact, Message, Part, TaskArtifactUpdateEvent, TaskState
from google.protobuf.struct_pb2 import Value
from opentelemetry.trace import Span, StatusCode

from persona_agent.a2a.context_keys import (
    BUDGET_STATE_KEY,
    CALLER_KEY,
    CONSULT_CHAIN_KEY,
    PARTS_METADATA_KEY,
    REQUEST_ID_KEY,
    WHOLE_ANSWER_STATE_KEY,
)
from persona_agent.a2a.extensions import COST_EXTENSION_URI, cost_payload
from persona_agent.a2a.input import message_text
from persona_agent.a2a.lifecycle import TaskExecutor
from persona_agent.chat.budget import BudgetLimits, CallBudget
from persona_agent.chat.engine import ChatEngine
from persona_agent.chat.events import Done, Token, ToolEnd, ToolOutput, ToolStart
from persona_agent.chat.tools import Turn
from persona_agent.errors import PersonaAgentError
from persona_agent.observe.logs import LOG_FIELDS, bind_log_fields
from persona_agent.observe.metrics import HubMetrics
from persona_agent.observe.tracing import TRACER
from persona_agent.personas.model import Persona
from persona_agent.security.audit import AuditLog
from persona_agent.security.quotas import Quotas

__all__ = [
    "ANSWER_ARTIFACT_NAME",
    "PersonaAgentExecutor",
    "conversation_key",
    "data_value",
    "task_budget",
]

logger = logging.getLogger(__name__)

ANSWER_ARTIFACT_NAME = "answer"


class PersonaAgentExecutor(TaskExecutor):
    """Runs one persona's answers as A2A tasks.

    ``execute()`` emits ``working``, streams the answer as artifact-update chunks
    of one artifact (``append`` after the first, an empty ``last_chunk`` at the
    end; the whole answer in one event when nobody watches it grow:
    :data:`WHOLE_ANSWER_STATE_KEY`), reports each tool call as a ``working``
    status update, and ends with ``completed`` (the answer as the status
    message, plus a cost-v1 DataPart), ``input-required`` (a tool's question for the
    user, an outside agent's, as the status message: the task's next message is the
    answer) or ``failed`` (a short message, never a stack trace).

    ``cancel()`` stops the task's events at once and emits ``canceled``; the
    SDK then cancels ``execute()``, which closes the LLM stream and abandons any
    tool call at its current await.

    Each task has its node of the request's call budget (:func:`task_budget`), and its
    cost-v1 covers that node's whole tree (its consultations' calls too). Only a task
    asked for from outside counts as the caller's running task: one started inside the
    hub for it (a consultation) is part of the same request.

    Each task is a span (``invoke_agent {persona id}``, with the task, context and
    persona ids), parent of the engine's model, tool and database spans; with
    ``metrics``, tasks running, finished by state, their duration and their time to
    the first text of the answer are counted.
    """

    def __init__(
        self,
        persona: Persona,
        engine: ChatEngine,
        audit: AuditLog | None = None,
        quotas: Quotas | None = None,
        metrics: HubMetrics | None = None,
        *,
        budget: BudgetLimits | None = None,
    ) -> None:
        """``budget``: the calls one request may make (:func:`task_budget`)."""
        self.persona = persona
        self.engine = engine
        self.audit = audit
        self.quotas = quotas
        self.metrics = metrics
        self.budget = budget if budget is not None else BudgetLimits()
        self._cancelled: set[str] = set()
        self.running: dict[str, ServerCallContext] = {}
        """Tasks being answered now, with the call context that started each."""
        self._updaters: dict[str, TaskUpdater] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Answer the message; the conversation is the caller's (see :func:`conversation_key`)."""
        message = context.message
        task_id, context_id = context.task_id, context.context_id
        if message is None or not task_id or not context_id:
            raise ValueError("execute() needs a message, a task id and a context id")
        persona = self.persona
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": persona.id,
            "gen_ai.agent.name": persona.name,
            "gen_ai.conversation.id": context_id,
            "persona_agent.persona.id": persona.id,
            "a2a.task.id": task_id,
            "a2a.context.id": context_id,
        }
        with TRACER.start_as_current_span(
            f"invoke_agent {persona.id}", attributes=attributes
        ) as span:
            await self._execute(context, event_queue, message, span)

    async def _execute(
        self, context: RequestContext, event_queue: EventQueue, message: Message, span: Span
    ) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        started = time.monotonic()
        state = "interrupted"  # by the hub's shutdown, unless it ends otherwise
        if context.current_task is None:
            task = new_task_from_user_message(message)
            task.status.timestamp.GetCurrentTime()
            await event_queue.enqueue_event(task)
            self._audit("task.create", context, task_id=task_id, contextId=context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        self.running[task_id] = context.call_context
        self._updaters[task_id] = updater
        log_fields = bind_log_fields(persona=self.persona.id, task=task_id, context=context_id)
        running = self.metrics.tasks_running.labels(self.persona.id) if self.metrics else None
        if running is not None:
            running.inc()
        try:
            await updater.start_work()
            whole = bool(context.call_context.state.get(WHOLE_ANSWER_STATE_KEY))
            user = context.call_context.user
            owner = user.user_name if user.is_authenticated else ""
            conversation = conversation_key(owner, context_id)
            caller = context.call_context.state.get(CALLER_KEY)
            chain = context.call_context.state.get(CONSULT_CHAIN_KEY, ())
            budget, nested = task_budget(context.call_context, self.persona, self.budget)
            turn = Turn(
                persona_id=self.persona.id,
                conversation=conversation,
                task_id=task_id,
                context_id=context_id,
                chain=(*chain, self.persona.id),
                origin=context.call_context,
                budget=budget,
            )
            # A task started inside the hub for a request (a consultation) is part of it:
            # the request's own task counts for the caller, once (each for its persona).
            if self.quotas is not None and caller:
                with self.quotas.running(None if nested else caller, self.persona.id):
                    state = await self._answer(message, turn, budget, updater, whole, started)
            else:
                state = await self._answer(message, turn, budget, updater, whole, started)
        except PersonaAgentError as error:
            reference = uuid.uuid4().hex[:12]
            logger.warning(
                "persona %s, task %s failed (reference %s): %s",
                self.persona.id,
                task_id,
                reference,
                error,  # with what the LLM server said, which the client is not shown
            )
            reason = f"{error.message} (reference {reference}: see the hub's log)"
            state = "failed"
            span.set_status(StatusCode.ERROR, reason)
            await self._finish_failed(updater, task_id, reason)
        except Exception as error:
            reference = uuid.uuid4().hex[:12]
            logger.exception(
                "persona %s, task %s: internal error (reference %s)",
                self.persona.id,
                task_id,
                reference,
            )
            reason = f"Internal error while answering (reference {reference})"
            state = "failed"
            span.record_exception(error)
            span.set_status(StatusCode.ERROR, reason)
            await self._finish_failed(updater, task_id, reason)
        finally:
            if task_id in self._cancelled:
                state = "canceled"
            span.set_attribute("a2a.task.state", state)
            if self.metrics is not None and running is not None:
                running.dec()
                self.metrics.tasks.labels(self.persona.id, state).inc()
                seconds = time.monotonic() - started
                self.metrics.task_seconds.labels(self.persona.id, state).observe(seconds)
            self._cancelled.discard(task_id)
            self.running.pop(task_id, None)
            self._updaters.pop(task_id, None)
            LOG_FIELDS.reset(log_fields)

    async def _answer(
        self,
        message: Message,
        turn: Turn,
        budget: CallBudget,
        updater: TaskUpdater,
        whole: bool,
        started: float,
    ) -> str:
        """Answer: ``whole``, in one artifact event at the end; ``started``: when the task
        started (for the time to the first text); ``budget``: the task's node (its cost).
        The state the task ends in: ``completed``, or ``input-required`` when a tool's
        question waits for the user."""
        task_id = turn.task_id
        text = await message_text(message)
        chunks = _AnswerChunks(updater)
        first_text = (
            self.metrics.first_text_seconds.labels(self.persona.id) if self.metrics else None
        )
        answer = self.engine.stream(self.persona, turn.conversation, text, turn=turn)
        async with aclosing(answer) as events:
            async for event in events:
                if task_id in self._cancelled:
                    return "canceled"
                if isinstance(event, Token):
                    if first_text is not None:
                        first_text.observe(time.monotonic() - started)
                        first_text = None
                    if whole:
                        continue  # Done carries the whole text
                    await chunks.add(event.text, last=False)
                elif isinstance(event, ToolStart):
                    payload = {
                        "kind": "tool-call",
                        "tool": event.name,
                        "arguments": event.arguments,
                    }
                    await _tool_status(
                        updater, f"Calling tool {event.name}", event.call_id, payload
                    )
                elif isinstance(event, ToolOutput):
                    progress = {"kind": "tool-progress", "tool": event.name, **event.data}
                    await _tool_status(updater, event.text, event.call_id, progress)
                elif isinstance(event, ToolEnd):
                    outcome = "failed" if event.is_error else "returned"
                    result: dict[str, Any] = {
                        "kind": "tool-result",
                        "tool": event.name,
                        "isError": event.is_error,
                        "result": event.result[:2000],
                        "durationMs": round(event.duration_ms, 3),
                        **event.data,
                    }
                    await _tool_status(
                        updater, f"Tool {event.name} {outcome}", event.call_id, result
                    )
                elif isinstance(event, Done):
                    if event.question is None or event.text:  # a question alone is no answer
                        await chunks.add(event.text if whole else "", last=True)
                    said = event.text if event.question is None else event.question
                    cost = cost_payload(event, budget)
                    final = updater.new_agent_message(
                        [Part(text=said), Part(data=data_value(cost))]
                    )
                    final.extensions.append(COST_EXTENSION_URI)
                    if task_id in self._cancelled:
                        return "canceled"
                    if event.question is not None:
                        await updater.requires_input(final)
                        return "input-required"
                    await updater.complete(final)
        return "completed"

    async def _finish_failed(self, updater: TaskUpdater, task_id: str, reason: str) -> None:
        if task_id in self._cancelled:
            return
        await updater.failed(updater.new_agent_message([Part(text=reason)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        if not task_id:
            return
        self._cancelled.add(task_id)
        self._audit("task.cancel", context, task_id=task_id)
        updater = TaskUpdater(event_queue, task_id, context_id or "")
        await updater.cancel(
            updater.new_agent_message([Part(text="Canceled at the client's request")])
        )

    async def canceled_elsewhere(self, task_id: str) -> bool:
        """Stop answering a task that another replica canceled (it is ``canceled`` in the
        shared store already); whether it was running here.

        The cancel status goes through the SDK like any event: saving it finds the task
        finished, so the SDK reloads it, tells this replica's subscribers, and cancels
        :meth:`execute` (the LLM stream is closed).
        """
        updater = self._updaters.get(task_id)
        if updater is None or task_id in self._cancelled:
            return False
        self._cancelled.add(task_id)
        await updater.cancel(
            updater.new_agent_message([Part(text="Canceled at the client's request")])
        )
        return True

    def _audit(self, action: str, context: RequestContext, **details: Any) -> None:
        if self.audit is None or not self.audit.enabled:
            return
        call = context.call_context
        user = call.user
        self.audit.record(
            action,
            principal=user.user_name if user.is_authenticated else None,
            persona=self.persona.id,
            request_id=call.state.get(REQUEST_ID_KEY),
            taskId=details.pop("task_id"),
            **details,
        )


def task_budget(
    call: ServerCallContext, persona: Persona, limits: BudgetLimits
) -> tuple[CallBudget, bool]:
    """The budget node of a task of ``persona`` started with ``call``, put in the call's
    state for the calls the task makes; and whether the task was started inside the hub
    for a request already counted (its call carried the asking task's node).

    A request from outside gets a root node: ``limits`` (the hub's), lowered by the
    persona's own. A task under another's hangs its node under that one, bounded by the
    persona's own limits only: it can lower what its part of the tree spends, never raise
    what the request may.
    """
    own = persona.limits
    mine = (own.model_calls_per_request, own.tool_calls_per_request)
    parent = call.state.get(BUDGET_STATE_KEY)
    if isinstance(parent, CallBudget):
        node, nested = parent.child(BudgetLimits().lowered(*mine)), True
    else:
        node, nested = CallBudget(limits.lowered(*mine)), False
    call.state[BUDGET_STATE_KEY] = node
    return node, nested


class _AnswerChunks:
    """The answer artifact's chunks, each telling how many parts the artifact has with it.

    The count (event metadata :data:`PARTS_METADATA_KEY`, not stored with the task)
    lets a subscriber drop a chunk that the task snapshot it was sent already holds.
    """

    def __init__(self, updater: TaskUpdater) -> None:
        self._updater = updater
        self._artifact_id = str(uuid.uuid4())
        self._parts = 0

    async def add(self, text: str, *, last: bool) -> None:
        self._parts += 1
        event = TaskArtifactUpdateEvent(
            task_id=self._updater.task_id,
            context_id=self._updater.context_id,
            artifact=Artifact(
                artifact_id=self._artifact_id, name=ANSWER_ARTIFACT_NAME, parts=[Part(text=text)]
            ),
            append=self._parts > 1,
            last_chunk=last,
        )
        event.metadata.update({PARTS_METADATA_KEY: self._parts})
        await self._updater.event_queue.enqueue_event(event)


async def _tool_status(
    updater: TaskUpdater, text: str, call_id: str, payload: dict[str, Any]
) -> None:
    """A ``working`` status update telling of a tool call: a text part and a data part."""
    message = updater.new_agent_message(
        [Part(text=text), Part(data=data_value({**payload, "id": call_id}))]
    )
    await updater.update_status(TaskState.TASK_STATE_WORKING, message)


def conversation_key(owner: str, context_id: str) -> str:
    """The conversation of a caller's ``contextId``: the context id alone for an anonymous
    caller (anyone who knows it continues it), else the caller's too, so that another
    caller reusing the id starts a conversation of its own. The owner is quoted (no ``:``
    in it), and an anonymous context id that starts with ``@`` gets ``@:`` before it, so
    that no owner and context id can spell another caller's key."""
    if not owner:
        return f"@:{context_id}" if context_id.startswith("@") else context_id
    return f"@{quote(owner, safe='')}:{context_id}"


def data_value(data: dict[str, Any]) -> Value:
    """``data`` as the value of a data part (a protobuf ``Struct``)."""
    value = Value()
    value.struct_value.update(data)
    return value
