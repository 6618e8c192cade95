"""The life of a task, as every executor of the hub runs it: one base that owns what every
task does, whatever answers it (a persona's chat, a panel's meeting)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, SendMessageConfiguration
from opentelemetry.trace import Span, StatusCode

from persona_agent.a2a.context_keys import (
    BUDGET_STATE_KEY,
    CALLER_KEY,
    CONSULT_CHAIN_KEY,
    CONVERSATION_MODE_STATE_KEY,
    NEW_CONTEXT_STATE_KEY,
    REQUEST_ID_KEY,
    SUPPLIED_TURN_STATE_KEY,
    TASK_ERROR_STATE_KEY,
    TASK_STARTED_STATE_KEY,
    WHOLE_ANSWER_STATE_KEY,
)
from persona_agent.a2a.input import DEFAULT_BUDGET, MessageRead, read_message
from persona_agent.a2a.message_extensions import ConversationOp, message_conversation, message_user
from persona_agent.a2a.tasks.image_parts import NO_INTAKE, ImageIntake
from persona_agent.chat.budget import BudgetLimits, CallBudget
from persona_agent.chat.supplied import SuppliedTurn
from persona_agent.chat.tools import Turn
from persona_agent.conversations.keys import conversation_key
from persona_agent.errors import PersonaAgentError
from persona_agent.knowledge.sent_documents import DocumentBudget
from persona_agent.observe.logs import LOG_FIELDS, bind_log_fields
from persona_agent.observe.metrics import HubMetrics
from persona_agent.observe.tracing import TRACER
from persona_agent.personas.model import Persona
from persona_agent.security.audit import AuditLog
from persona_agent.security.quotas import Quotas

__all__ = [
    "AUDIO_MODES",
    "CANCELED_TEXT",
    "TaskExecutor",
    "TaskTurn",
    "accepted_audio",
    "task_budget",
]

CANCELED_TEXT = "Canceled at the client's request"
"""The message of a task's ``canceled`` status."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskTurn(Turn):
    """The turn of one task: who asks and where (the :class:`Turn` the engine and the
    tools read), and what the executor's turn needs besides."""

    budget: CallBudget
    """The task's node of the request's calls, whose tree its cost covers."""
    text: str
    """The user's message, as text for the model."""
    updater: TaskUpdater
    """Where the task's events go."""
    started: float
    """When the task started (``time.monotonic()``)."""
    reference: str = ""
    """The task whose answer a ``regenerate`` or ``continue`` takes (its message's
    ``referenceTaskIds``: the conversation extension)."""
    audio: str | None = None
    """The audio media type the client accepts (``audio/wav``): the answer is spoken too
    (docs/media.md#voice); ``None``: it accepts no audio (:func:`accepted_audio`)."""


class TaskExecutor(AgentExecutor):
    """The SDK's executor, running each task's life; a subclass writes the task's own
    turn (:meth:`answer`), nothing else.

    ``execute()`` checks the request (a message, a task id and a context id, else
    ``ValueError``), creates and enqueues the task when it is new (audited
    ``task.create``), emits ``working``, reads the user's message as text, gives the task
    its node of the request's call budget (:func:`task_budget`) and its :class:`TaskTurn`,
    and counts it as running for its caller while :meth:`answer` runs: only a task asked
    for from outside counts for the caller; one started inside the hub for that request
    (a consultation, a panel member's turn) counts for its persona only. It ends in the
    state :meth:`answer` returns, or ``failed``: a :class:`PersonaAgentError` is logged
    at WARNING with its detail, and the client reads its message and a reference; any
    other error is logged at ERROR with its traceback, and the client reads "Internal
    error while answering" and a reference (never a stack trace).

    ``cancel()`` marks the task canceled (audited ``task.cancel``) and emits
    ``canceled`` at once; the SDK then cancels ``execute()`` at its current await (the
    LLM stream is closed, the tool call or the members' tasks abandoned).
    :meth:`canceled_elsewhere` does the same for a task another replica canceled.

    Each task is a span (``invoke_agent {persona id}``, with the GenAI agent and
    conversation ids, the task and context ids, and its final state in
    ``a2a.task.state``), parent of the spans of its turn. The metrics count tasks
    running, finished by final state, and their duration; JSON log lines of the task
    carry its persona, task and context ids. :attr:`running` holds the tasks being
    answered now (task id → the call context that started each), for the registry.
    """

    kind: ClassVar[str] = "persona"
    """What log lines call the persona answering (``panel`` for a panel)."""

    def __init__(
        self,
        persona: Persona,
        *,
        audit: AuditLog,
        quotas: Quotas,
        metrics: HubMetrics,
        budget: BudgetLimits,
        documents: DocumentBudget = DEFAULT_BUDGET,
        images: ImageIntake = NO_INTAKE,
    ) -> None:
        """``audit``, ``quotas``, ``metrics``: the hub's (each does nothing when off);
        ``budget``: the calls one request may make, its whole tree together; ``documents``:
        the tokens a message's documents may show the model, and what reading one may cost;
        ``images``: how the message's images are read (fetched, prepared)."""
        self.persona = persona
        self.documents = documents
        self.images = images
        self.audit = audit
        self.quotas = quotas
        self.metrics = metrics
        self.budget = budget
        self.running: dict[str, ServerCallContext] = {}
        """Tasks being answered now, with the call context that started each."""
        self._cancelled: set[str] = set()
        self._updaters: dict[str, TaskUpdater] = {}
        self._logger = logging.getLogger(type(self).__module__)

    @abstractmethod
    async def answer(self, turn: TaskTurn) -> str:
        """Write the task's own turn for the user's message (``turn.text``) through
        ``turn.updater``, up to its final status; the state the task ends in
        (``completed``, ``failed``, ``input-required``, ``canceled``). Check
        :meth:`is_canceled` after each await that may outlive a cancel."""

    def is_canceled(self, task_id: str) -> bool:
        """Whether the task was canceled (its ``canceled`` status is sent already)."""
        return task_id in self._cancelled

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
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
            await self._run(context, event_queue, message, span)

    async def _run(
        self, context: RequestContext, event_queue: EventQueue, message: Message, span: Span
    ) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        call = context.call_context
        waiting = call.state.get(TASK_STARTED_STATE_KEY)
        if isinstance(waiting, asyncio.Future) and not waiting.done():
            waiting.set_result(task_id)
        started = time.monotonic()
        state = "interrupted"  # by the hub's shutdown, unless it ends otherwise
        if context.current_task is None:
            task = new_task_from_user_message(message)
            task.status.timestamp.GetCurrentTime()
            await event_queue.enqueue_event(task)
            self._audit("task.create", call, task_id, contextId=context_id)
        updater = TaskUpdater(event_queue, task_id, context_id)
        self.running[task_id] = call
        self._updaters[task_id] = updater
        log_fields = bind_log_fields(persona=self.persona.id, task=task_id, context=context_id)
        running = self.metrics.tasks_running.labels(self.persona.id)
        running.inc()
        try:
            await updater.start_work()
            audio = accepted_audio(context.configuration)
            state = await self._limited(message, call, updater, started, audio=audio)
        except Exception as error:
            if isinstance(error, PersonaAgentError):  # for a door inside the hub that asked
                call.state[TASK_ERROR_STATE_KEY] = error
            state = await self._failed(updater, span, error)
        finally:
            if task_id in self._cancelled:
                state = "canceled"
            span.set_attribute("a2a.task.state", state)
            running.dec()
            self.metrics.tasks.labels(self.persona.id, state).inc()
            seconds = time.monotonic() - started
            self.metrics.task_seconds.labels(self.persona.id, state).observe(seconds)
            self._cancelled.discard(task_id)
            self.running.pop(task_id, None)
            self._updaters.pop(task_id, None)
            LOG_FIELDS.reset(log_fields)

    async def _limited(
        self,
        message: Message,
        call: ServerCallContext,
        updater: TaskUpdater,
        started: float,
        *,
        audio: str | None = None,
    ) -> str:
        """:meth:`answer`, counted as the caller's running task while it runs."""
        persona = self.persona
        op = _conversation_op(message, call)
        # Regenerate and continue answer what was said: the message's text is not read.
        read = (
            await read_message(message, self.documents) if op.mode == "message" else MessageRead("")
        )
        images = await self.images.read(message) if op.mode == "message" else ()
        budget, nested = task_budget(call, persona, self.budget)
        user = call.user
        owner = user.user_name if user.is_authenticated else ""
        chain = call.state.get(CONSULT_CHAIN_KEY, ())
        supplied = call.state.get(SUPPLIED_TURN_STATE_KEY)
        turn = TaskTurn(
            persona_id=persona.id,
            conversation=conversation_key(owner, updater.context_id),
            task_id=updater.task_id,
            context_id=updater.context_id,
            chain=(*chain, persona.id),
            origin=call,
            budget=budget,
            owner=owner,
            new_context=bool(call.state.get(NEW_CONTEXT_STATE_KEY)),
            text=read.text,
            files=read.kept,
            documents=read.documents,
            question=read.question,
            images=images,
            user=message_user(message),
            mode=op.mode,
            greeting=op.greeting,
            reference=op.reference,
            updater=updater,
            whole=bool(call.state.get(WHOLE_ANSWER_STATE_KEY)),
            started=started,
            audio=audio,
            supplied=supplied if isinstance(supplied, SuppliedTurn) else None,
        )
        caller = call.state.get(CALLER_KEY)
        if not caller:
            return await self.answer(turn)
        # A task started inside the hub for a request (a consultation, a panel member's
        # turn) is part of it: the request's own task counts for the caller, once (each
        # task for its persona).
        with self.quotas.running(None if nested else caller, persona.id):
            return await self.answer(turn)

    async def _failed(self, updater: TaskUpdater, span: Span, error: Exception) -> str:
        """End the task ``failed`` with a reference to the log line that tells why."""
        reference = uuid.uuid4().hex[:12]
        task_id, persona_id = updater.task_id, self.persona.id
        if isinstance(error, PersonaAgentError):
            self._logger.warning(
                "%s %s, task %s failed (reference %s): %s",
                self.kind,
                persona_id,
                task_id,
                reference,
                error,  # with what the LLM server said, which the client is not shown
            )
            reason = f"{error.message} (reference {reference}: see the hub's log)"
        else:
            self._logger.error(
                "%s %s, task %s: internal error (reference %s)",
                self.kind,
                persona_id,
                task_id,
                reference,
                exc_info=error,
            )
            reason = f"Internal error while answering (reference {reference})"
            span.record_exception(error)
        span.set_status(StatusCode.ERROR, reason)
        if task_id not in self._cancelled:
            await updater.failed(updater.new_agent_message([Part(text=reason)]))
        return "failed"

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id, context.context_id
        if not task_id:
            return
        self._cancelled.add(task_id)
        self._audit("task.cancel", context.call_context, task_id)
        updater = TaskUpdater(event_queue, task_id, context_id or "")
        await updater.cancel(updater.new_agent_message([Part(text=CANCELED_TEXT)]))

    async def canceled_elsewhere(self, task_id: str) -> bool:
        """Stop answering a task that another replica canceled (it is ``canceled`` in the
        shared store already); whether it was running here.

        The cancel status goes through the SDK like any event: the shared store takes it
        as the cancel already written (not a conflict), so this replica's subscribers get
        it as the stream's one final status, in their protocol version's shape, and the SDK
        cancels :meth:`execute` (the LLM stream is closed).
        """
        updater = self._updaters.get(task_id)
        if updater is None or task_id in self._cancelled:
            return False
        self._cancelled.add(task_id)
        await updater.cancel(updater.new_agent_message([Part(text=CANCELED_TEXT)]))
        return True

    def _audit(self, action: str, call: ServerCallContext, task_id: str, **details: Any) -> None:
        if not self.audit.enabled:  # the log would drop it: skip reading the caller
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


def _conversation_op(message: Message, call: ServerCallContext) -> ConversationOp:
    """What the task does with its conversation: what a door inside the hub asked for it
    (:data:`~.context_keys.CONVERSATION_MODE_STATE_KEY`: the REST regenerate and continue),
    else what the message's conversation extension asks, else an ordinary message."""
    asked = call.state.get(CONVERSATION_MODE_STATE_KEY)
    if asked in ("regenerate", "continue"):
        return ConversationOp(mode=asked)
    return message_conversation(message) or ConversationOp()


AUDIO_MODES = frozenset({"audio/wav", "audio/x-wav", "audio/wave", "audio/*"})
"""Accepted output modes that ask for the answer spoken (as WAV files)."""


def accepted_audio(configuration: SendMessageConfiguration | None) -> str | None:
    """``audio/wav`` when the send's ``acceptedOutputModes`` name it (or ``audio/x-wav``,
    ``audio/wave``, ``audio/*``; parameters and case aside), else ``None``: no modes mean
    "anything" in A2A, and ``*/*`` too, neither of which should cost speech."""
    if configuration is None:
        return None
    for mode in configuration.accepted_output_modes:
        if mode.partition(";")[0].strip().lower() in AUDIO_MODES:
            return "audio/wav"
    return None


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
