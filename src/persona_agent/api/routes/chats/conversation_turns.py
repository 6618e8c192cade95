"""A turn the REST API starts on a stored conversation (regenerate, continue): an A2A task
of the persona, made through the one task path every door takes.

The caller is admitted as an A2A call on the persona
(:class:`~persona_agent.a2a.admission.Admission`: its credential, the ``a2a`` scope, the
personas its key names, the persona's ``access:``, the request rates, the running tasks),
and the task is started through the hub's forwarding request handler
(:class:`~persona_agent.collab.local_calls.LocalCalls`) with the caller's call context: the
task is the caller's (GetTask, CancelTask, SubscribeToTask on the persona's A2A endpoint
with its id), it is counted, audited and traced as any task, and the calls it makes
(consultations, a panel's members) are authorized as that caller's. The answer is the
:class:`~.conversation_bodies.Answer` of a plain ``POST``, or, asked with ``Accept:
text/event-stream``, a stream of server-sent events (:func:`event_stream`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from a2a.utils.errors import InvalidParamsError, InvalidRequestError
from fastapi import HTTPException, Request, status
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from persona_agent.a2a.admission import Admission, Refusal, admitted_context
from persona_agent.a2a.context_keys import REQUEST_ID_KEY
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.api.routes.chats.conversation_bodies import Answer, Conversation
from persona_agent.collab.local_calls import (
    LocalCalls,
    LocalEnd,
    LocalEvent,
    LocalStart,
    LocalText,
)
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.conversations.keys import history_key
from persona_agent.errors import (
    HTTP_STATUSES,
    BudgetSpentError,
    ConversationNotFound,
    LLMError,
    PersonaAgentError,
)
from persona_agent.security.audit import request_id_of
from persona_agent.security.principal import Principal

__all__ = [
    "EVENT_STREAM",
    "REST_BINDING",
    "ConversationTurns",
    "TurnMode",
    "end_status",
    "wants_events",
]

TurnMode = Literal["regenerate", "continue"]

REST_BINDING = "rest"
"""A REST turn's binding label in the request metrics (``persona_agent_a2a_requests_total``)."""
EVENT_STREAM = "text/event-stream"
PING_SECONDS = 15.0
"""Seconds a streamed turn may send nothing before a comment keeps its connection."""
ASKED = {
    "regenerate": "Regenerate the last answer.",
    "continue": "Continue the last answer.",
}
"""The text of the task's message (the task's history shows what was asked; the persona is
not shown it: it answers the conversation as stored)."""

ConversationReader = Callable[[str], Awaitable[Conversation]]
"""The conversation as it now is, for its owner (``""``: an anonymous caller)."""


@dataclass(slots=True)
class _Turn:
    """A turn admitted and about to start: whose conversation, and the task's events."""

    owner: str
    events: AsyncGenerator[LocalEvent, None]


class ConversationTurns:
    """Starts the REST API's turns on the hub's personas (see the module)."""

    def __init__(self, registry: A2ARegistry) -> None:
        self._registry = registry
        self._admission = Admission(registry.services)
        self._calls = LocalCalls(registry.local_handler)

    @asynccontextmanager
    async def begin(
        self,
        request: Request,
        conversations: ConversationStore,
        persona_id: str,
        context_id: str,
        mode: TurnMode,
        *,
        streaming: bool,
    ) -> AsyncIterator[_Turn]:
        """Admit the caller, find its conversation, and start the task (its events); the
        caller's place among its running tasks (and, ``streaming``, its open streams) is
        held while this lasts.

        Raises:
            HTTPException: 401, 403 or 429 (with ``Retry-After``): the A2A admission's
                refusal, counted and audited as the A2A router's.
            ConversationNotFound: no such persona, or no such conversation of the caller's.
        """
        persona = self._registry.persona(persona_id)
        if persona is None:
            raise ConversationNotFound()
        inner: dict[str, Any] = {REQUEST_ID_KEY: request_id_of(request.scope["headers"])}
        _refuse(
            await self._admission.check(
                persona, request.scope["headers"], request.scope.get("client"), inner
            )
        )
        user = inner.get("user")
        owner = user.name if isinstance(user, Principal) else ""
        if await conversations.read(history_key(persona_id, owner, context_id)) is None:
            raise ConversationNotFound()
        async with self._admission.held(persona, "stream" if streaming else "send", inner) as no:
            _refuse(no)
            events = self._calls.stream(
                persona_id,
                ASKED[mode],
                origin=admitted_context(inner),
                context_id=context_id,
                whole=not streaming,
                binding=REST_BINDING,
                mode=mode,
            )
            async with aclosing(events):
                yield _Turn(owner, events)

    async def answer(
        self,
        request: Request,
        conversations: ConversationStore,
        persona_id: str,
        context_id: str,
        mode: TurnMode,
        read: ConversationReader,
    ) -> Answer:
        """Run the turn to its end: the answer and the conversation as it now is.

        Raises:
            HTTPException: a refusal (:meth:`begin`), or the task did not complete
                (:func:`end_status`: 502 when the model failed, with the task's message).
            ConversationNotFound: as :meth:`begin`.
        """
        async with self.begin(
            request, conversations, persona_id, context_id, mode, streaming=False
        ) as turn:
            start, end = await _ended(await _first(turn), turn.events)
        code = end_status(end)
        if code != status.HTTP_200_OK:
            raise HTTPException(code, end.text or f"The task ended {end.state}")
        task_id = end.task_id or (start.task_id if start is not None else "")
        conversation = await read(turn.owner)
        return Answer(
            answer=end.text,
            conversation=conversation,
            task_id=task_id,
            state=end.state,
            cost=cost_of(end),
        )

    async def event_stream(
        self,
        request: Request,
        conversations: ConversationStore,
        persona_id: str,
        context_id: str,
        mode: TurnMode,
        read: ConversationReader,
    ) -> Response:
        """The turn as server-sent events: ``task`` (its ids) first, then ``text`` (each
        piece of the answer as it is written), then ``answer`` (the :class:`Answer`) or
        ``error`` (``status``, ``detail``, ``task_id``, ``state``: the status a plain POST
        would answer with). A refusal comes before any event, as an HTTP error; a client
        that leaves cancels the task.

        Raises:
            HTTPException, ConversationNotFound: as :meth:`begin`, before the stream.
        """
        stack = AsyncExitStack()
        try:
            turn = await stack.enter_async_context(
                self.begin(request, conversations, persona_id, context_id, mode, streaming=True)
            )
            first = await _first(turn)
        except BaseException:
            await stack.aclose()
            raise
        return _EventStream(_frames(first, turn, read), stack)


_UNANSWERED = "The persona did not answer"


async def _first(turn: _Turn) -> LocalEvent:
    """The task's first event; a call refused before any task was made is an HTTP error
    (422: an id the A2A handler takes not, such as a context id over its length)."""
    try:
        event = await anext(turn.events)
    except (InvalidParamsError, InvalidRequestError) as error:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, error.message) from None
    except StopAsyncIteration:
        event = LocalEnd("", "failed", _UNANSWERED)
    if isinstance(event, LocalEnd) and not event.task_id:  # refused: no task was made
        raise HTTPException(end_status(event), event.text or f"The call ended {event.state}")
    return event


async def _ended(
    first: LocalEvent, events: AsyncGenerator[LocalEvent, None]
) -> tuple[LocalStart | None, LocalEnd]:
    """The task's start and end (its text is the end's: the whole answer), from its first
    event on."""
    start: LocalStart | None = None
    event: LocalEvent | None = first
    while event is not None:
        if isinstance(event, LocalStart):
            start = event
        elif isinstance(event, LocalEnd):
            return start, event
        event = await anext(events, None)
    return start, LocalEnd(start.task_id if start else "", "failed", _UNANSWERED)


async def _frames(
    first: LocalEvent, turn: _Turn, read: ConversationReader
) -> AsyncGenerator[bytes, None]:
    """The events of :meth:`ConversationTurns.event_stream`, as SSE frames, from the task's
    first event on."""
    task_id = ""
    end = LocalEnd("", "failed", _UNANSWERED)
    event: LocalEvent | None = first
    while event is not None:
        if isinstance(event, LocalStart):
            task_id = event.task_id
            yield _frame("task", {"task_id": event.task_id, "context_id": event.context_id})
        elif isinstance(event, LocalText):
            yield _frame("text", {"text": event.text})
        else:
            end = event
            break
        event = await anext(turn.events, None)
    code = end_status(end)
    task_id = end.task_id or task_id
    if code != status.HTTP_200_OK:
        detail = end.text or f"The task ended {end.state}"
        error = {"status": code, "detail": detail, "task_id": task_id, "state": end.state}
        yield _frame("error", error)
        return
    answer = Answer(
        answer=end.text,
        conversation=await read(turn.owner),
        task_id=task_id,
        state=end.state,
        cost=cost_of(end),
    )
    yield _frame("answer", answer.model_dump(mode="json"))


def cost_of(end: LocalEnd) -> dict[str, Any] | None:
    """The cost-v1 data of the task's final message, if it has one."""
    return next((data for data in end.data if data.get("kind") == "cost-v1"), None)


def _frame(name: str, data: dict[str, Any]) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {name}\ndata: {payload}\n\n".encode()


def end_status(end: LocalEnd) -> int:
    """The HTTP status of a turn that ended so: 200 when the task completed (or waits for
    the user's answer to a tool's question); else the status of the hub's error it failed
    with (409: nothing to regenerate or continue), 502 when the model failed (or another
    error), 403 when the call was refused, 409 when it was canceled."""
    if end.state in ("completed", "input-required"):
        return status.HTTP_200_OK
    if end.state == "rejected":
        return status.HTTP_403_FORBIDDEN
    if end.state == "canceled":
        return status.HTTP_409_CONFLICT
    return _failure_status(end.error)


def _failure_status(error: PersonaAgentError | None) -> int:
    if error is None or isinstance(error, LLMError | BudgetSpentError):
        return status.HTTP_502_BAD_GATEWAY
    for kind in type(error).__mro__:  # its own kind's status first, as the REST API's handlers
        if issubclass(kind, PersonaAgentError) and kind in HTTP_STATUSES:
            return HTTP_STATUSES[kind]
    return status.HTTP_502_BAD_GATEWAY


def _refuse(refusal: Refusal | None) -> None:
    if refusal is not None:
        raise HTTPException(refusal.status, refusal.message, headers=refusal.headers or None)


def wants_events(request: Request) -> bool:
    """Whether the client asks for the answer as server-sent events (``Accept:
    text/event-stream``)."""
    accept = request.headers.get("accept", "")
    return any(kind.split(";", 1)[0].strip().lower() == EVENT_STREAM for kind in accept.split(","))


class _EventStream(Response):
    """Server-sent events: ``frames`` as they come, a comment (``: ping``) after
    :data:`PING_SECONDS` without one (a proxy keeps the connection while the model loads or
    thinks), then the end. The frames are closed when the client leaves (the task is then
    canceled), and ``stack`` (what the turn holds) when the response ends, whichever way."""

    media_type = EVENT_STREAM

    def __init__(self, frames: AsyncGenerator[bytes, None], stack: AsyncExitStack) -> None:
        self._frames = frames
        self._stack = stack
        self.status_code = status.HTTP_200_OK
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sending = anyio.Lock()
        sent = [anyio.current_time()]

        async def body(chunk: bytes, *, more: bool = True) -> None:
            async with sending:
                await send({"type": "http.response.body", "body": chunk, "more_body": more})
                sent[0] = anyio.current_time()

        async with (
            self._stack,
            aclosing(self._frames) as frames,
            anyio.create_task_group() as group,
        ):

            async def left() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()  # the frames are closed: the task is canceled

            async def pings() -> None:
                while True:
                    await anyio.sleep(max(0.0, sent[0] + PING_SECONDS - anyio.current_time()))
                    if anyio.current_time() - sent[0] >= PING_SECONDS:
                        await body(b": ping\n\n")

            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            group.start_soon(left)
            group.start_soon(pings)
            async for frame in frames:
                await body(frame)
            await body(b"", more=False)
            group.cancel_scope.cancel()
