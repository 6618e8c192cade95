"""One SDK route set for every persona: a request handler that forwards each call.

The A2A router puts the persona id in the ASGI scope; the context builder
copies it into ``ServerCallContext.state``; :class:`PersonaRequestHandler`
forwards the call to that persona's own SDK request handler. One route set
costs the same for ten personas or ten thousand (DESIGN.md: ~6 KiB a persona
instead of ~37 KiB for a Starlette app each).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Literal, Protocol

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

from persona_agent.a2a.input import check_parts
from persona_agent.a2a.keys import (
    CALLER_KEY,
    PARTS_METADATA_KEY,
    PERSONA_SCOPE_KEY,
    PERSONA_STATE_KEY,
    RAW_STATUS_STATE_KEY,
    REQUEST_ID_KEY,
    RPC_BODY_SCOPE_KEY,
    WHOLE_ANSWER_STATE_KEY,
)
from persona_agent.a2a.sdk_fixes.routes import check_status_filter
from persona_agent.a2a.sdk_fixes.subscription import without_replayed


class HandlerOwner(Protocol):
    """What the lookup gives: a persona's app (``registry.PersonaApp``), with its handler."""

    @property
    def handler(self) -> RequestHandler: ...


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
      so none is stored or looked up.
    """

    def __init__(
        self,
        lookup: Callable[[str, str | None], HandlerOwner | None],
        *,
        task_listing: TaskListing = "context",
        max_id_length: int = MAX_ID_LENGTH,
    ) -> None:
        self._lookup = lookup
        self._task_listing = task_listing
        self._max_id_length = max_id_length

    def _check_ids(self, **ids: str) -> None:
        for field, value in ids.items():
            if len(value) > self._max_id_length:
                raise InvalidParamsError(
                    message=f"{field} is longer than {self._max_id_length} characters"
                )

    def _check_message(self, message: Message) -> None:
        self._check_ids(
            messageId=message.message_id, contextId=message.context_id, taskId=message.task_id
        )
        for reference in message.reference_task_ids:
            self._check_ids(referenceTaskIds=reference)

    def _handler(self, context: ServerCallContext, task_id: str | None = None) -> RequestHandler:
        """The handler of the persona; for a call about a running task, the one running it
        (a task keeps running on the definition it started with after a replace)."""
        persona_id = context.state.get(PERSONA_STATE_KEY, "")
        app = self._lookup(persona_id, task_id)
        if app is None:
            # The router answers 404 before this; a persona removed mid-request lands here.
            raise InvalidRequestError(message=f"No persona with id '{persona_id}'")
        return app.handler

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        self._check_ids(id=params.id)
        return await self._handler(context).on_get_task(params, context)

    async def on_list_tasks(
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
        self._check_ids(id=params.id)
        return await self._handler(context, params.id).on_cancel_task(params, context)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        self._check_message(params.message)
        handler = self._handler(context, params.message.task_id or None)
        check_parts(params.message)
        # A blocking send's client sees only the finished task: the answer goes out whole.
        context.state[WHOLE_ANSWER_STATE_KEY] = not params.configuration.return_immediately
        return await handler.on_message_send(params, context)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        self._check_message(params.message)
        handler = self._handler(context, params.message.task_id or None)
        check_parts(params.message)
        async for event in handler.on_message_send_stream(params, context):
            yield event

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        self._check_ids(taskId=params.task_id, id=params.id)
        return await self._handler(context).on_create_task_push_notification_config(params, context)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        self._check_ids(taskId=params.task_id, id=params.id)
        return await self._handler(context).on_get_task_push_notification_config(params, context)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """The SDK's subscription: the task, then every later event, none of them twice
        (:mod:`persona_agent.a2a.sdk_fixes.subscription`)."""
        self._check_ids(id=params.id)
        events = self._handler(context, params.id).on_subscribe_to_task(params, context)
        async for event in without_replayed(events, PARTS_METADATA_KEY):
            yield event

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        self._check_ids(taskId=params.task_id)
        return await self._handler(context).on_list_task_push_notification_configs(params, context)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        self._check_ids(taskId=params.task_id, id=params.id)
        await self._handler(context).on_delete_task_push_notification_config(params, context)

    async def on_get_extended_agent_card(
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
