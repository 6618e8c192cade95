"""One SDK route set for every persona: a request handler that forwards each call.

The A2A router puts the persona id in the ASGI scope; the context builder
copies it into ``ServerCallContext.state``; :class:`PersonaRequestHandler`
forwards the call to that persona's own SDK request handler. One route set
costs the same for ten personas or ten thousand (DESIGN.md: ~6 KiB a persona
instead of ~37 KiB for a Starlette app each).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Literal, Protocol, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    InvalidRequestError,
    UnsupportedOperationError,
)
from starlette.requests import Request

from persona_agent.a2a.context_keys import (
    BINDING_KEY,
    CALLER_KEY,
    NEW_CONTEXT_STATE_KEY,
    PARTS_METADATA_KEY,
    PERSONA_SCOPE_KEY,
    PERSONA_STATE_KEY,
    PRINCIPAL_STATE_KEY,
    RAW_STATUS_STATE_KEY,
    REQUEST_ID_KEY,
    RPC_BODY_SCOPE_KEY,
    WHOLE_ANSWER_STATE_KEY,
)
from persona_agent.a2a.input import PartLimits, check_output_modes, check_parts
from persona_agent.a2a.message_extensions import check_extensions
from persona_agent.a2a.sdk_fixes.last_event import status_for_later_tasks
from persona_agent.a2a.sdk_fixes.routes import check_status_filter
from persona_agent.a2a.sdk_fixes.subscription import without_replayed
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.personas.model import Persona
from persona_agent.security.authorization import Action, Authorization
from persona_agent.security.principal import Principal

T = TypeVar("T")


class HandlerOwner(Protocol):
    """What the lookup gives: a persona's app (``registry.PersonaApp``), with its handler."""

    @property
    def persona(self) -> Persona: ...

    @property
    def handler(self) -> RequestHandler: ...

    @property
    def sees_images(self) -> bool: ...

    @property
    def output_modes(self) -> Sequence[str]: ...


__all__ = [
    "MAX_ID_LENGTH",
    "PersonaContextBuilder",
    "PersonaRequestHandler",
    "TaskListing",
]


class PersonaContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's context, plus the persona the router chose.

    Also keeps a ListTasks ``status`` as the client wrote it (the SDK's parse
    loses an unknown one), for :meth:`PersonaRequestHandler.on_list_tasks`.
    """

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.get("headers")
        if isinstance(headers, dict):  # the SDK keeps every header; credentials stay out
            for name in SECRET_HEADERS:
                headers.pop(name, None)
        scope = request.scope
        context.state[PERSONA_STATE_KEY] = scope.get(PERSONA_SCOPE_KEY, "")
        context.state[REQUEST_ID_KEY] = scope.get(REQUEST_ID_KEY)
        context.state[CALLER_KEY] = scope.get(CALLER_KEY)
        context.state[BINDING_KEY] = scope.get(BINDING_KEY, "")
        user = scope.get("user")
        if isinstance(user, Principal):
            context.state[PRINCIPAL_STATE_KEY] = user
        body = scope.get(RPC_BODY_SCOPE_KEY)
        if isinstance(body, dict):
            params = body.get("params")
            if body.get("method") == "ListTasks" and isinstance(params, dict):
                context.state[RAW_STATUS_STATE_KEY] = params.get("status")
        elif scope["method"] == "GET" and scope["path"].endswith("/tasks"):
            context.state[RAW_STATUS_STATE_KEY] = request.query_params.get("status")
        return context


SECRET_HEADERS = ("authorization", "x-api-key", "cookie", "proxy-authorization")
"""Headers that carry credentials: never kept in a call context (which the SDK logs)."""

TaskListing = Literal["context", "off", "all"]
"""Who may list tasks (``PERSONA_AGENT_TASK_LISTING``): see :class:`PersonaRequestHandler`."""

MAX_ID_LENGTH = 128
"""Longest task, context, message or push-configuration id a client may send."""


def _identified(context: ServerCallContext) -> bool:
    """Whether the caller is an authenticated user with a name: the task store's owner
    (``persona:user``) then holds that user's tasks only."""
    return context.user.is_authenticated and bool(context.user.user_name)


class PersonaRequestHandler(RequestHandler):
    """Forwards every A2A call to the request handler of the persona in the context.

    Before forwarding, it applies what the SDK leaves to the server:

    - ``task_listing``: ``context`` (the default) lists only the tasks of the
      ``contextId`` the caller names (with no authentication, knowing a
      conversation's random id is the only proof of owning it; a ListTasks without
      one is Invalid params), ``off`` refuses ListTasks (UnsupportedOperation),
      ``all`` lists every task of the persona (a trusted network only). A caller
      the context builder authenticated (with a user name) needs no contextId under
      ``context``: the task store keeps each user's tasks apart (``persona:user``);
    - ids a client sends are at most ``max_id_length`` characters (Invalid params),
      so none is stored or looked up;
    - ``authorization``: every call is one the caller may make
      (:class:`~persona_agent.security.authorization.Authorization`, ``CALL`` on the
      persona), else Invalid request with ``data.httpStatus`` 401 or 403. The router
      refuses a direct call before it gets here; this check is the one the calls the hub
      makes for a caller (consultations, panel turns: :class:`.local_calls.LocalCalls`)
      pass too, with the caller's principal from the call context.

    ``metrics`` counts every call by persona, method, binding and outcome, and the
    streams open now; ``parts``: what a sent message may hold (parts, images, their
    bytes), refused before any task is made.
    """

    def __init__(
        self,
        lookup: Callable[[str, str | None], HandlerOwner | None],
        *,
        task_listing: TaskListing = "context",
        max_id_length: int = MAX_ID_LENGTH,
        metrics: HubMetrics = NO_METRICS,
        authorization: Authorization | None = None,
        parts: PartLimits | None = None,
    ) -> None:
        self._lookup = lookup
        self._parts = parts or PartLimits()
        self._authorization = authorization or Authorization()
        self._task_listing = task_listing
        self._max_id_length = max_id_length
        self._metrics = metrics

    async def _counted(
        self, method: str, context: ServerCallContext, call: Callable[[], Awaitable[T]]
    ) -> T:
        """``call()``, counted in the request metrics as ``method``."""
        outcome = "ok"
        try:
            return await call()
        except Exception as error:
            outcome = type(error).__name__
            raise
        finally:
            self._count(method, context, outcome)

    async def _streamed(
        self, method: str, context: ServerCallContext, events: AsyncGenerator[Event]
    ) -> AsyncGenerator[Event]:
        """``events``, counted in the request metrics as ``method`` and as an open stream
        while they last."""
        persona = context.state.get(PERSONA_STATE_KEY, "")
        streams = self._metrics.open_streams.labels(persona)
        streams.inc()
        outcome = "ok"
        try:
            async for event in events:
                yield event
        except Exception as error:
            outcome = type(error).__name__
            raise
        finally:
            streams.dec()
            self._count(method, context, outcome)

    def _count(self, method: str, context: ServerCallContext, outcome: str) -> None:
        state = context.state
        self._metrics.requests.labels(
            state.get(PERSONA_STATE_KEY, ""), method, state.get(BINDING_KEY, ""), outcome
        ).inc()

    def _check_ids(self, **ids: str) -> None:
        for field, value in ids.items():
            if len(value) > self._max_id_length:
                raise InvalidParamsError(
                    message=f"{field} is longer than {self._max_id_length} characters"
                )

    def _check_message(self, message: Message, context: ServerCallContext) -> None:
        self._check_ids(
            messageId=message.message_id, contextId=message.context_id, taskId=message.task_id
        )
        for reference in message.reference_task_ids:
            self._check_ids(referenceTaskIds=reference)
        # Neither a context nor a task: the SDK mints the context, whose turn reads nothing.
        context.state[NEW_CONTEXT_STATE_KEY] = not message.context_id and not message.task_id

    def _handler(self, context: ServerCallContext, task_id: str | None = None) -> RequestHandler:
        """The handler of the persona; for a call about a running task, the one running it
        (a task keeps running on the definition it started with after a replace)."""
        return self._app(context, task_id).handler

    def _app(self, context: ServerCallContext, task_id: str | None = None) -> HandlerOwner:
        """The persona's app the call goes to (:meth:`_handler`), the caller allowed."""
        persona_id = context.state.get(PERSONA_STATE_KEY, "")
        app = self._lookup(persona_id, task_id)
        if app is None:
            # The router answers 404 before this; a persona removed mid-request lands here.
            raise InvalidRequestError(message=f"No persona with id '{persona_id}'")
        principal = context.state.get(PRINCIPAL_STATE_KEY)
        refused = self._authorization.refusal(
            principal if isinstance(principal, Principal) else None,
            Action.CALL,
            persona_id,
            access=app.persona.access,
        )
        if refused is not None:
            raise InvalidRequestError(message=refused.message, data={"httpStatus": refused.status})
        return app

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        return await self._counted("GetTask", context, lambda: self._get_task(params, context))

    async def _get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        self._check_ids(id=params.id)
        return await self._handler(context).on_get_task(params, context)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        return await self._counted("ListTasks", context, lambda: self._list_tasks(params, context))

    async def _list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        if self._task_listing == "off":
            raise UnsupportedOperationError(
                message="ListTasks is turned off on this hub (PERSONA_AGENT_TASK_LISTING=off)"
            )
        self._check_ids(contextId=params.context_id)
        if self._task_listing == "context" and not params.context_id and not _identified(context):
            raise InvalidParamsError(
                message="ListTasks needs a contextId: a caller lists only the tasks of a "
                "conversation it knows (PERSONA_AGENT_TASK_LISTING=context)"
            )
        check_status_filter(context.state.get(RAW_STATUS_STATE_KEY))
        return await self._handler(context).on_list_tasks(params, context)

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        return await self._counted("CancelTask", context, lambda: self._cancel(params, context))

    async def _cancel(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        self._check_ids(id=params.id)
        return await self._handler(context, params.id).on_cancel_task(params, context)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        return await self._counted("SendMessage", context, lambda: self._send(params, context))

    async def _send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        self._check_message(params.message, context)
        app = self._app(context, params.message.task_id or None)
        handler = app.handler
        check_parts(params.message, sees=app.sees_images, limits=self._parts)
        check_output_modes(params.configuration.accepted_output_modes, app.output_modes)
        check_extensions(params.message)
        # A blocking send's client sees only the finished task: the answer goes out whole.
        context.state[WHOLE_ANSWER_STATE_KEY] = not params.configuration.return_immediately
        return await handler.on_message_send(params, context)

    def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        return self._streamed("SendStreamingMessage", context, self._stream(params, context))

    async def _stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        self._check_message(params.message, context)
        app = self._app(context, params.message.task_id or None)
        handler = app.handler
        check_parts(params.message, sees=app.sees_images, limits=self._parts)
        check_output_modes(params.configuration.accepted_output_modes, app.output_modes)
        check_extensions(params.message)
        # A task the SDK reloads after another replica's cancel ends the stream as a status
        # (:mod:`persona_agent.a2a.sdk_fixes.last_event`).
        events = status_for_later_tasks(handler.on_message_send_stream(params, context))
        async for event in events:
            yield event

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        async def create() -> TaskPushNotificationConfig:
            self._check_ids(taskId=params.task_id, id=params.id)
            handler = self._handler(context)
            return await handler.on_create_task_push_notification_config(params, context)

        return await self._counted("CreateTaskPushNotificationConfig", context, create)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        async def get() -> TaskPushNotificationConfig:
            self._check_ids(taskId=params.task_id, id=params.id)
            handler = self._handler(context)
            return await handler.on_get_task_push_notification_config(params, context)

        return await self._counted("GetTaskPushNotificationConfig", context, get)

    def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The SDK's subscription: the task, then every later event, none of them twice
        (:mod:`persona_agent.a2a.sdk_fixes.subscription`), ending with a status
        (:mod:`persona_agent.a2a.sdk_fixes.last_event`)."""
        return self._streamed("SubscribeToTask", context, self._subscribe(params, context))

    async def _subscribe(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        self._check_ids(id=params.id)
        events = self._handler(context, params.id).on_subscribe_to_task(params, context)
        async for event in status_for_later_tasks(without_replayed(events, PARTS_METADATA_KEY)):
            yield event

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        async def list_configs() -> ListTaskPushNotificationConfigsResponse:
            self._check_ids(taskId=params.task_id)
            handler = self._handler(context)
            return await handler.on_list_task_push_notification_configs(params, context)

        return await self._counted("ListTaskPushNotificationConfigs", context, list_configs)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        async def delete() -> None:
            self._check_ids(taskId=params.task_id, id=params.id)
            handler = self._handler(context)
            await handler.on_delete_task_push_notification_config(params, context)

        await self._counted("DeleteTaskPushNotificationConfig", context, delete)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        return await self._counted(
            "GetExtendedAgentCard", context, lambda: self._extended_card(params, context)
        )

    async def _extended_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        handler = self._handler(context)
        offered = getattr(handler, "extended_agent_card", None) is not None
        if offered and not _identified(context):
            raise ExtendedAgentCardNotConfiguredError(
                "The extended agent card is served to authenticated callers only: "
                "authenticate as the card's securitySchemes say"
            )
        return await handler.on_get_extended_agent_card(params, context)
