"""Messages to the hub's own personas, in process: consultations, panels, and the doors
that start a turn for a caller without A2A on the wire (``/mcp``, the REST conversation
turns).

Each call is a real A2A task of the persona called, made through the hub's request handler
(the one the router serves, with the same checks and counts) without an HTTP hop: it is
stored, listed and cancelable like any task, owned by the same caller, and its message
names the task that asked for it (``referenceTaskIds``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidRequestError
from google.protobuf.json_format import MessageToDict

from persona_agent.a2a.context_keys import (
    BINDING_KEY,
    BUDGET_STATE_KEY,
    CALLER_KEY,
    CONSULT_CHAIN_KEY,
    CONVERSATION_MODE_STATE_KEY,
    CUT_METADATA_KEY,
    ENDED_STATE_NAMES,
    PERSONA_STATE_KEY,
    PRINCIPAL_STATE_KEY,
    REQUEST_ID_KEY,
    SUPPLIED_TURN_STATE_KEY,
    TASK_ERROR_STATE_KEY,
    TASK_STARTED_STATE_KEY,
    WHOLE_ANSWER_STATE_KEY,
)
from persona_agent.chat.supplied import SuppliedTurn
from persona_agent.errors import PersonaAgentError

__all__ = [
    "LocalCalls",
    "LocalEnd",
    "LocalEvent",
    "LocalStart",
    "LocalText",
    "data_of",
    "text_of",
]

logger = logging.getLogger(__name__)

CANCEL_TIMEOUT = 1.0
"""Seconds an abandoned call's cancel may take."""
START_TIMEOUT = 10.0
"""Seconds a call given up before its task's first event waits for the task to start (to
cancel it); none starts when the call was refused."""


@dataclass(frozen=True, slots=True)
class LocalStart:
    """The task answering the call exists."""

    task_id: str
    context_id: str


@dataclass(frozen=True, slots=True)
class LocalText:
    """A piece of the answer, as it streams: of the artifact ``artifact`` (its id; a
    panel's answer has one a member's turn), named ``name`` (on its first piece)."""

    text: str
    artifact: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class LocalEnd:
    """The task ended: ``state`` (``completed``, ``failed``, ``canceled``, ``rejected``, or
    ``input-required``/``auth-required`` when it waits), with its final message's text."""

    task_id: str
    state: str
    text: str
    error: PersonaAgentError | None = None
    """The hub's error a ``failed`` task failed with (in process only: the client of a
    task sees its message), for a door that answers in a protocol of its own."""
    data: tuple[dict[str, Any], ...] = ()
    """The final message's data parts (its cost-v1, a panel's turns, calls handed back to
    the caller), for a door that answers in a protocol of its own."""
    cut: bool = False
    """The answer stopped at the model's token cap (its final message says so)."""

    @property
    def ok(self) -> bool:
        return self.state == "completed"


LocalEvent = LocalStart | LocalText | LocalEnd


class LocalCalls:
    """Sends messages to the hub's personas through ``handler`` (a
    :class:`~persona_agent.a2a.forwarding.PersonaRequestHandler`)."""

    def __init__(self, handler: RequestHandler) -> None:
        self.handler = handler
        self._cancelling: set[asyncio.Future[None]] = set()
        """Cancels under way in tasks of their own (kept: the loop holds tasks weakly)."""

    async def stream(
        self,
        persona_id: str,
        text: str,
        *,
        origin: Any = None,
        chain: tuple[str, ...] = (),
        context_id: str = "",
        reference_task_ids: tuple[str, ...] = (),
        whole: bool = False,
        binding: str = "",
        mode: Literal["message", "regenerate", "continue"] = "message",
        supplied: SuppliedTurn | None = None,
    ) -> AsyncGenerator[LocalEvent, None]:
        """Ask ``persona_id``: :class:`LocalStart`, the answer as :class:`LocalText`, then
        :class:`LocalEnd`. ``origin``: the call context of the turn asking (its caller owns
        the new task); ``chain``: the personas asking, outermost first.

        A call the caller may not make (the handler's authorization) ends at once,
        ``rejected``, with the reason and no task. Closing the iterator (or cancelling its
        consumer) before the end cancels the task, within :data:`CANCEL_TIMEOUT` seconds.
        ``whole``: the answer comes as one :class:`LocalText` at the end (fewer events, for
        a caller that waits for it anyway). ``binding``: the door the call came through, for
        the request metrics (``mcp``, ``rest``); none for the hub's own calls. ``mode``:
        ``regenerate`` or ``continue`` the conversation's last answer (``context_id``'s, as
        stored; ``text`` is then not read), else a message. ``supplied``: the conversation
        before ``text`` as a stateless door's caller sends it, with its instructions, tools
        and sampling (nothing stored is read or written for it; :mod:`~persona_agent.chat.
        supplied`).
        """
        context = self._context(persona_id, origin, chain)
        started = _told(context, origin, binding=binding, whole=whole, mode=mode, supplied=supplied)
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=context_id,
            reference_task_ids=list(reference_task_ids),
        )
        task_id = ""
        ended = False
        events = self.handler.on_message_send_stream(SendMessageRequest(message=message), context)
        try:
            async with aclosing(events), aclosing(_refusals_ended(events)) as stream:
                async for event in stream:
                    if isinstance(event, Task):
                        if not task_id:
                            task_id = event.id
                            yield LocalStart(event.id, event.context_id)
                        if event.status.state in ENDED_STATE_NAMES:  # ended before streaming
                            ended = True
                            yield _end(event.id, event.status.state, event.status.message, context)
                            return
                    elif isinstance(event, TaskArtifactUpdateEvent):
                        chunk = "".join(part.text for part in event.artifact.parts)
                        if chunk:
                            artifact = event.artifact
                            yield LocalText(chunk, artifact.artifact_id, artifact.name)
                    elif isinstance(event, TaskStatusUpdateEvent):
                        state = event.status.state
                        if state in ENDED_STATE_NAMES:
                            ended = True
                            yield _end(event.task_id, state, event.status.message, context)
                            return
                    elif isinstance(event, Message):  # an agent that answers with a message
                        ended = True
                        yield LocalEnd(task_id, "completed", text_of(event))
                        return
                    elif isinstance(event, LocalEnd):  # refused: no task was made
                        ended = True
                        yield event
                        return
        finally:
            if task_id and not ended:
                await self._cancel(task_id, context)
            elif not ended:  # given up before the task's first event came: cancel it once known
                cancel = asyncio.ensure_future(self._cancel_when_started(started, context))
                self._cancelling.add(cancel)
                cancel.add_done_callback(self._cancelling.discard)

    async def _cancel_when_started(
        self, started: asyncio.Future[str], context: ServerCallContext
    ) -> None:
        """Cancel the task once the executor says its id (it may not have started yet)."""
        try:
            async with asyncio.timeout(START_TIMEOUT):
                task_id = await started
        except TimeoutError:  # no task was made (refused, or the hub is closing)
            return
        await self._cancel(task_id, context)

    async def _cancel(self, task_id: str, context: ServerCallContext) -> None:
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT):
                await asyncio.shield(
                    self.handler.on_cancel_task(CancelTaskRequest(id=task_id), context)
                )
        except Exception as error:  # it ended meanwhile, or the hub is closing
            logger.debug("cancel of the local task %s: %r", task_id, error)

    @staticmethod
    def _context(persona_id: str, origin: Any, chain: tuple[str, ...]) -> ServerCallContext:
        state: dict[str, Any] = {PERSONA_STATE_KEY: persona_id, CONSULT_CHAIN_KEY: chain}
        if isinstance(origin, ServerCallContext):
            for key in (CALLER_KEY, REQUEST_ID_KEY, PRINCIPAL_STATE_KEY):
                if key in origin.state:
                    state[key] = origin.state[key]
            return ServerCallContext(
                user=origin.user,
                tenant=origin.tenant,
                state=state,
                requested_extensions=set(origin.requested_extensions),
            )
        return ServerCallContext(state=state)


def _told(
    context: ServerCallContext,
    origin: Any,
    *,
    binding: str,
    whole: bool,
    mode: Literal["message", "regenerate", "continue"],
    supplied: SuppliedTurn | None = None,
) -> asyncio.Future[str]:
    """Tell the task of the call, in its call context, what :meth:`LocalCalls.stream` was
    asked (the door, whether the answer comes whole, the conversation's mode, or the
    conversation the caller supplies) and the asking task's budget; the future the
    executor resolves with the task's id."""
    started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    context.state[TASK_STARTED_STATE_KEY] = started
    if binding:
        context.state[BINDING_KEY] = binding
    context.state[WHOLE_ANSWER_STATE_KEY] = whole
    if mode != "message":
        context.state[CONVERSATION_MODE_STATE_KEY] = mode
    if supplied is not None:
        context.state[SUPPLIED_TURN_STATE_KEY] = supplied
    if isinstance(origin, ServerCallContext) and BUDGET_STATE_KEY in origin.state:
        # The asking task's budget itself (not a copy): the whole tree spends one.
        context.state[BUDGET_STATE_KEY] = origin.state[BUDGET_STATE_KEY]
    return started


async def _refusals_ended(
    events: AsyncGenerator[Any, None],
) -> AsyncGenerator[Any, None]:
    """``events``; a refusal of the call (the handler's authorization: Invalid request with
    an HTTP status of 401 or 403) becomes a ``rejected`` end."""
    try:
        async for event in events:
            yield event
    except InvalidRequestError as error:
        status = (error.data or {}).get("httpStatus")
        if status not in (401, 403):
            raise
        yield LocalEnd("", "rejected", error.message)


def data_of(message: Message) -> tuple[dict[str, Any], ...]:
    """The data parts of an agent's message that are JSON objects."""
    values = (MessageToDict(part.data) for part in message.parts if part.HasField("data"))
    return tuple(value for value in values if isinstance(value, dict))


def text_of(message: Message) -> str:
    """The text parts of an agent's message (its data parts, such as the cost, left out)."""
    return "\n".join(part.text for part in message.parts if part.text)


def _end(task_id: str, state: TaskState, message: Message, context: ServerCallContext) -> LocalEnd:
    error = context.state.get(TASK_ERROR_STATE_KEY)
    failure = error if isinstance(error, PersonaAgentError) else None
    state_name = ENDED_STATE_NAMES[state]
    cut = CUT_METADATA_KEY in message.metadata.fields
    return LocalEnd(task_id, state_name, text_of(message), failure, data_of(message), cut)
