"""PersonaAgentExecutor: the boundary between the A2A protocol and the chat engine."""

from __future__ import annotations

import time
import uuid
from contextlib import aclosing
from typing import Any, Protocol

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
)
from google.protobuf.struct_pb2 import Value

from persona_agent.a2a.context_keys import (
    CALLER_KEY,
    CONVERSATION_MODE_STATE_KEY,
    CUT_METADATA_KEY,
    HANDED_DATA_KIND,
    PARTS_METADATA_KEY,
)
from persona_agent.a2a.extensions import COST_EXTENSION_URI, cost_payload, memory_payload
from persona_agent.a2a.input import DEFAULT_BUDGET, InputError
from persona_agent.a2a.tasks.image_parts import NO_INTAKE, ImageIntake
from persona_agent.a2a.tasks.lifecycle import TaskExecutor, TaskTurn
from persona_agent.a2a.tasks.spoken import VOICE_ERROR_METADATA_KEY, SpokenAnswer
from persona_agent.chat.budget import BudgetLimits
from persona_agent.chat.engine import ChatEngine
from persona_agent.chat.events import Done, Progress, Token, ToolEnd, ToolOutput, ToolStart
from persona_agent.chat.memory_tools import MEMORY_DATA_KEY
from persona_agent.knowledge.sent_documents import DocumentBudget
from persona_agent.observe.metrics import HistogramLike, HubMetrics
from persona_agent.personas.model import Persona
from persona_agent.security.audit import AuditLog
from persona_agent.security.quotas import Quotas
from persona_agent.speech import NO_SPEECH, Speech

__all__ = ["ANSWER_ARTIFACT_NAME", "CITATIONS_METADATA_KEY", "PersonaAgentExecutor", "data_value"]

ANSWER_ARTIFACT_NAME = "answer"
CITATIONS_METADATA_KEY = "citations"
"""The final message's metadata key listing the documents' passages the answer was given
(docs/knowledge.md)."""


class TaskLister(Protocol):
    """Where the executor finds a conversation's latest task: the persona's task store
    (the SDK's ``TaskStore`` or, on replicas, ``VersionedTaskStore``)."""

    async def list(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse: ...


class PersonaAgentExecutor(TaskExecutor):
    """Runs one persona's answers as A2A tasks; the task's life (checks, limits, span,
    metrics, failures, cancel, audit) is :class:`~persona_agent.a2a.tasks.lifecycle.TaskExecutor`'s.

    Its turn streams the answer as artifact-update chunks of one artifact (``append``
    after the first, an empty ``last_chunk`` at the end; the whole answer in one event
    when nobody watches it grow: a blocking send), reports each tool call, and what the
    model does before it writes (loading, waiting, reading), as a ``working`` status
    update, and ends with ``completed`` (the answer as the status
    message, plus a cost-v1 DataPart, and the passages of the persona's documents it was
    given as the message's ``citations`` metadata) or ``input-required`` (a tool's question for the
    user, an outside agent's, as the status message: the task's next message is the
    answer).

    When the client accepts audio (:attr:`TaskTurn.audio`) and the persona has a voice,
    the answer is also spoken as it streams: a second artifact, ``voice``
    (:class:`~persona_agent.a2a.tasks.spoken.SpokenAnswer`), whose last chunk comes before the
    final status. A voice that fails leaves the text answer whole, and the final message's
    metadata ``voiceError`` says why.

    Each task has its node of the request's call budget
    (:func:`~persona_agent.a2a.tasks.lifecycle.task_budget`), and its cost-v1 covers that node's
    whole tree (its consultations' calls too). Its span is the parent of the engine's
    model, tool and database spans; the metrics also count each task's time to the first
    text of its answer.
    """

    def __init__(
        self,
        persona: Persona,
        engine: ChatEngine,
        *,
        audit: AuditLog,
        quotas: Quotas,
        metrics: HubMetrics,
        budget: BudgetLimits,
        documents: DocumentBudget = DEFAULT_BUDGET,
        tasks: TaskLister | None = None,
        images: ImageIntake = NO_INTAKE,
        speech: Speech = NO_SPEECH,
    ) -> None:
        """``budget``: the calls one request may make, its whole tree together;
        ``documents``: the tokens a message's documents may show the model; ``tasks``:
        the persona's tasks, where a ``regenerate`` or ``continue`` finds the conversation's
        latest (without: any task it names is taken as the latest); ``images``: how the
        message's images are read; ``speech``: the hub's voices, for clients that accept
        audio."""
        super().__init__(
            persona,
            audit=audit,
            quotas=quotas,
            metrics=metrics,
            budget=budget,
            documents=documents,
            images=images,
        )
        self.engine = engine
        self.tasks = tasks
        self.speech = speech

    async def answer(self, turn: TaskTurn) -> str:
        """The engine's answer, as it streams (see the class).

        Raises:
            InputError: a ``regenerate`` or ``continue`` that names another task than the
                conversation's latest completed one, or a greeting the persona does not
                have or for a conversation under way (the conversation extension). One a
                door inside the hub asked (the REST turns: the call context's
                :data:`~persona_agent.a2a.context_keys.CONVERSATION_MODE_STATE_KEY`) names
                no task: it takes the conversation as stored.
        """
        await self._check_conversation_op(turn)
        task_id, updater = turn.task_id, turn.updater
        chunks = _AnswerChunks(updater)
        memory: dict[str, list[str]] = {}  # what the memory tools changed, for memory-v1
        first_text: HistogramLike | None = self.metrics.first_text_seconds.labels(self.persona.id)
        spoken = self._spoken(turn)
        answer = self.engine.stream(self.persona, turn.conversation, turn.text, turn=turn)
        try:
            async with aclosing(answer) as events:
                async for event in events:
                    if self.is_canceled(task_id):
                        return "canceled"
                    if isinstance(event, Token):
                        if first_text is not None:
                            first_text.observe(time.monotonic() - turn.started)
                            first_text = None
                        if not turn.whole:  # else Done carries the whole text
                            await chunks.add(event.text, last=False)
                        if isinstance(spoken, SpokenAnswer):
                            spoken.add(event.text)
                    elif isinstance(event, Done):
                        return await self._done(event, turn, chunks, memory, spoken)
                    elif isinstance(event, Progress):
                        await _progress_status(updater, event)
                    else:
                        if isinstance(event, ToolEnd) and not event.is_error:
                            _gather_memory(memory, event.data)
                        await _tool_status(updater, event)
        finally:
            if isinstance(spoken, SpokenAnswer):
                spoken.cancel()  # ended early: what waits is not spoken (done: nothing waits)
        return "completed"

    def _spoken(self, turn: TaskTurn) -> SpokenAnswer | str | None:
        """The task's spoken answer when its client accepts audio and the persona speaks;
        else why it cannot (its voice is not installed), or ``None`` (no speech asked)."""
        persona, speech = self.persona, self.speech
        if turn.audio is None or not speech.enabled or persona.panel is not None:
            return None
        voice = speech.voice(persona.voice)
        if voice is None:
            return speech.missing(persona.voice)
        # Whose turn its sentences wait for: the caller the request was admitted as.
        state = getattr(turn.origin, "state", None) or {}
        caller = str(state.get(CALLER_KEY) or turn.owner)
        return SpokenAnswer(speech, voice, turn.updater, whole=turn.whole, caller=caller)

    async def _check_conversation_op(self, turn: TaskTurn) -> None:
        """What the conversation extension asks is what this conversation can do."""
        if turn.greeting is not None:
            persona = self.persona
            count = 1 + len(persona.alternate_greetings) if persona.greeting is not None else 0
            if turn.greeting >= count:
                raise InputError(
                    f"The persona has no greeting {turn.greeting}: it has {count} "
                    f"(0 to {count - 1})"
                    if count
                    else "The persona has no greeting to choose"
                )
            if await self.engine.history.load(f"{persona.id}:{turn.conversation}"):
                raise InputError(
                    "A greeting opens a new conversation: this context has begun already"
                )
        if turn.mode == "message" or self.tasks is None:
            return
        if CONVERSATION_MODE_STATE_KEY in turn.origin.state:
            return  # a door inside the hub asked it of the conversation as it is stored
        # The latest task that answered (one that failed or was canceled left nothing).
        listed = await self.tasks.list(
            ListTasksRequest(
                context_id=turn.context_id,
                status=TaskState.TASK_STATE_COMPLETED,
                page_size=2,
            ),
            turn.origin,
        )
        latest = next((task for task in listed.tasks if task.id != turn.task_id), None)
        if latest is None:
            raise InputError(f"Nothing to {turn.mode}: this conversation has no answer yet")
        if latest.id != turn.reference:
            raise InputError(
                f"{turn.mode} takes the conversation's latest answer: referenceTaskIds names "
                f"task {turn.reference}, and the latest completed task is {latest.id}"
            )

    async def _done(
        self,
        done: Done,
        turn: TaskTurn,
        chunks: _AnswerChunks,
        memory: dict[str, list[str]],
        spoken: SpokenAnswer | str | None,
    ) -> str:
        """The answer's last chunk (and the spoken answer's), then the task's final status
        with its cost (and what memory did, when it did anything)."""
        updater = turn.updater
        if done.question is None or done.text:  # a question alone is no answer
            await chunks.add(done.text if turn.whole else "", last=True)
        unspoken = await spoken.finish() if isinstance(spoken, SpokenAnswer) else spoken
        said = done.text if done.question is None else done.question
        cost = cost_payload(done, turn.budget)
        parts = [Part(text=said), Part(data=data_value(cost))]
        remembered = memory_payload(done, memory)
        if remembered is not None:
            parts.append(Part(data=data_value(remembered)))
        if done.handed:  # the caller's own tools, for it to run (a stateless door's)
            calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in done.handed]
            parts.append(Part(data=data_value({"kind": HANDED_DATA_KIND, "calls": calls})))
        final = updater.new_agent_message(parts)
        final.extensions.append(COST_EXTENSION_URI)
        if done.citations:  # the persona's documents the answer was given: [1] first
            final.metadata.update({CITATIONS_METADATA_KEY: list(done.citations)})
        if unspoken is not None:
            final.metadata.update({VOICE_ERROR_METADATA_KEY: unspoken})
        if done.cut:  # stopped at the token cap (a door that reports it: OpenAI's "length")
            final.metadata.update({CUT_METADATA_KEY: True})
        if self.is_canceled(updater.task_id):
            return "canceled"
        if done.question is not None:
            await updater.requires_input(final)
            return "input-required"
        await updater.complete(final)
        return "completed"


def _gather_memory(memory: dict[str, list[str]], data: dict[str, Any]) -> None:
    """Add what a memory tool changed (its result's ``memory`` data) to ``memory``."""
    changes = data.get(MEMORY_DATA_KEY)
    if isinstance(changes, dict):
        for name, texts in changes.items():
            if isinstance(texts, list):
                memory.setdefault(str(name), []).extend(str(text) for text in texts)


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


PROGRESS_TEXT = {
    "loading": "Loading the model",
    "waiting": "Waiting for the model (it answers one message at a time)",
    "reading": "Reading",
}


async def _progress_status(updater: TaskUpdater, event: Progress) -> None:
    """A ``working`` status update telling what the model does before it writes: a text
    part and a data part (``kind: progress``, ``phase``, ``tokens``: how many it reads)."""
    text = PROGRESS_TEXT[event.phase]
    if event.phase == "reading":
        text += f" ({event.tokens} new tokens)"
    payload = {"kind": "progress", "phase": event.phase, "tokens": event.tokens}
    message = updater.new_agent_message([Part(text=text), Part(data=data_value(payload))])
    await updater.update_status(TaskState.TASK_STATE_WORKING, message)


async def _tool_status(updater: TaskUpdater, event: ToolStart | ToolOutput | ToolEnd) -> None:
    """A ``working`` status update telling of a tool call: a text part and a data part."""
    payload: dict[str, Any]
    if isinstance(event, ToolStart):
        text = f"Calling tool {event.name}"
        payload = {"kind": "tool-call", "tool": event.name, "arguments": event.arguments}
    elif isinstance(event, ToolOutput):
        text = event.text
        payload = {"kind": "tool-progress", "tool": event.name, **event.data}
    else:
        text = f"Tool {event.name} {'failed' if event.is_error else 'returned'}"
        payload = {
            "kind": "tool-result",
            "tool": event.name,
            "isError": event.is_error,
            "result": event.result[:2000],
            "durationMs": round(event.duration_ms, 3),
            **event.data,
        }
    message = updater.new_agent_message(
        [Part(text=text), Part(data=data_value({**payload, "id": event.call_id}))]
    )
    await updater.update_status(TaskState.TASK_STATE_WORKING, message)


def data_value(data: dict[str, Any]) -> Value:
    """``data`` as the value of a data part (a protobuf ``Struct``)."""
    value = Value()
    value.struct_value.update(data)
    return value
