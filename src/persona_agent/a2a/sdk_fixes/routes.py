"""Where the hub corrects a2a-sdk 1.3 on the wire, so every client sees the specification.

The SDK's routes are used as they are, with these changes (docs/a2a.md lists
them; the conformance suite would show an SDK that fixes one, as a test that
fails here):

- v0.3 JSON-RPC: parameters that do not validate are Invalid params ``-32602``
  (the SDK validates envelope and parameters in one model and answers
  ``-32600``); VersionNotSupported is ``-32009`` (its v0.3 error table has no
  such row and answers ``-32603``).
- v0.3 HTTP+JSON: ``DELETE /v1/tasks/{id}/pushNotificationConfigs/{cid}`` has a
  route (the SDK has none, and the 1.0 ``/{tenant}`` mount took it and answered
  VersionNotSupported); subscribing to a finished task is a ``400``
  UnsupportedOperation (the SDK started the event stream first, so the client
  saw a broken stream); inline file bytes arrive intact and come back intact in a
  task's history (:mod:`.file_bytes`; the SDK decodes and encodes their base64 twice);
  a stream refused before its first event (a body
  that does not parse, a message no task can start from) and ``GET /v1/tasks/{id}`` with
  a ``historyLength`` that is not a count are a ``4xx`` (:mod:`.v03_requests`; the SDK
  cut the stream, and answered ``500``).
- ListTasks (1.0, both bindings): an unknown ``status`` is Invalid params
  (the SDK parses with ``ignore_unknown_fields``, which turns it into "any").
- 1.0: a message's unknown ``role``, and (JSON-RPC) a 1.0 method called without the
  ``A2A-Version`` header, get messages that say what to do (:mod:`.hints`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from a2a.compat.v0_3.context_builders import V03ServerCallContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import InvalidParamsError as JsonRpcInvalidParams
from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers import RequestHandler
from a2a.server.routes import ServerCallContextBuilder, create_rest_routes

# The adapter from here: the SDK's own import order (a2a.compat first) is circular.
from a2a.server.routes.jsonrpc_dispatcher import (  # type: ignore[attr-defined]
    JSONRPC03Adapter,
    JsonRpcDispatcher,
)
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskRequest,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3
from a2a.utils.error_handlers import rest_error_handler
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from a2a.utils.version_validator import validate_version
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, request_response

from persona_agent.a2a.context_keys import TERMINAL_STATES
from persona_agent.a2a.sdk_fixes.file_bytes import v03_file_bytes_in, v03_file_bytes_out
from persona_agent.a2a.sdk_fixes.hints import role_error, version_error
from persona_agent.a2a.sdk_fixes.v03_requests import (
    V03_GET_TASK,
    checked_history_length,
    checked_stream_start,
)

__all__ = ["check_status_filter", "jsonrpc_dispatcher", "rest_routes"]

VERSION_NOT_SUPPORTED = -32009

Endpoint = Callable[[Request], Awaitable[Response]]

V03_SEND = "/v1/message:send"
V03_STREAM = "/v1/message:stream"
V03_SUBSCRIBE = "/v1/tasks/{id}:subscribe"
V03_PUSH_CONFIG = "/v1/tasks/{id}/pushNotificationConfigs/{push_id}"
V03_WITH_MESSAGES = (V03_SEND, V03_STREAM, V03_SUBSCRIBE, "/v1/tasks/{id}", "/v1/tasks/{id}:cancel")
"""The v0.3 HTTP+JSON routes whose answers carry messages (so, maybe, a client's files)."""
SENDS = ("/message:send", "/message:stream")
"""The 1.0 HTTP+JSON routes that take a message."""
_JSONRPC_SENDS = frozenset({"SendMessage", "SendStreamingMessage"})


def check_status_filter(raw: object) -> None:
    """Refuse a ListTasks status that names no task state.

    Raises:
        InvalidParamsError: ``raw`` is neither a state's name nor its number.
    """
    if raw is None or raw == "":
        return
    states = TaskState.DESCRIPTOR
    if isinstance(raw, str) and raw in states.values_by_name:
        return
    if isinstance(raw, int) and not isinstance(raw, bool) and raw in states.values_by_number:
        return
    raise InvalidParamsError(
        message=f"Unknown task state {raw!r} for status: use one of " + ", ".join(TaskState.keys())
    )


# -- JSON-RPC --------------------------------------------------------------------


class _JsonRpc03Adapter(JSONRPC03Adapter):
    """The SDK's v0.3 adapter with the spec's codes for bad parameters and versions."""

    async def handle_request(
        self, request_id: str | int | None, method: str, body: dict[str, Any], request: Request
    ) -> JSONResponse | EventSourceResponse:
        # The dispatcher has checked the envelope (jsonrpc, id, method) already, so a
        # model that does not validate now has bad parameters.
        try:
            self.METHOD_TO_MODEL[method].model_validate(body)  # type: ignore[attr-defined]
        except ValueError as error:
            return self._generate_error_response(
                request_id, JsonRpcInvalidParams(data=_short(str(error)))
            )
        return await super().handle_request(request_id, method, body, request)

    def _generate_error_response(
        self, request_id: str | int | None, error: Exception | JSONRPCError
    ) -> JSONResponse:
        if isinstance(error, VersionNotSupportedError):
            error = JSONRPCError(code=VERSION_NOT_SUPPORTED, message=error.message)
        return super()._generate_error_response(request_id, error)


class _JsonRpcDispatcher(JsonRpcDispatcher):
    """The SDK's dispatcher, on the corrected v0.3 adapter, with errors that say what to
    do (:mod:`.hints`)."""

    def __init__(
        self,
        request_handler: RequestHandler,
        context_builder: ServerCallContextBuilder,
        shutdown_grace_period: float,
    ) -> None:
        super().__init__(
            request_handler=request_handler,
            context_builder=context_builder,
            enable_v0_3_compat=True,
            shutdown_grace_period=shutdown_grace_period,
        )
        self._v03_adapter = _JsonRpc03Adapter(
            http_handler=request_handler,
            context_builder=context_builder,
            shutdown_grace_period=shutdown_grace_period,
        )

    async def handle_requests(self, request: Request) -> Response:
        try:
            body = await request.json()  # the router's parse (a request caches its own)
        except (ValueError, RecursionError):
            body = None  # not JSON: the SDK answers so
        if (
            isinstance(body, dict)
            and body.get("jsonrpc") == "2.0"
            and isinstance(body.get("method"), str)  # a list or an object: unhashable
            and body["method"] in _JSONRPC_SENDS
        ):
            error = role_error(body.get("params"))
            request_id = body.get("id")
            # An id of another type: the SDK refuses the envelope.
            valid_id = isinstance(request_id, str | int | None) and not isinstance(request_id, bool)
            if error is not None and valid_id:
                return self._generate_error_response(request_id, error)
        return await super().handle_requests(request)

    async def _process_non_streaming_request(
        self, request_obj: Any, context: ServerCallContext
    ) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] | None = await super()._process_non_streaming_request(
                request_obj, context
            )
        except VersionNotSupportedError as error:
            raise version_error(error, context) from None
        return result

    async def _process_streaming_request(
        self, request_id: str | int | None, request_obj: Any, context: ServerCallContext
    ) -> AsyncGenerator[dict[str, Any]]:
        try:
            stream: AsyncGenerator[dict[str, Any]] = await super()._process_streaming_request(
                request_id, request_obj, context
            )
        except VersionNotSupportedError as error:
            raise version_error(error, context) from None
        return stream


def jsonrpc_dispatcher(
    handler: RequestHandler,
    *,
    context_builder: ServerCallContextBuilder,
    shutdown_grace_period: float,
) -> JsonRpcDispatcher:
    """What serves ``create_jsonrpc_routes``'s route (v1.0 and v0.3), corrected."""
    return _JsonRpcDispatcher(handler, context_builder, shutdown_grace_period)


# -- HTTP+JSON -------------------------------------------------------------------


def rest_routes(
    handler: RequestHandler,
    *,
    context_builder: ServerCallContextBuilder,
    shutdown_grace_period: float,
) -> list[BaseRoute]:
    """What ``create_rest_routes`` gives (v1.0 and v0.3), corrected."""
    sdk_routes = create_rest_routes(
        handler,
        context_builder=context_builder,
        enable_v0_3_compat=True,
        shutdown_grace_period=shutdown_grace_period,
    )
    v03_context = V03ServerCallContextBuilder(context_builder)
    routes: list[BaseRoute] = [
        Route(V03_PUSH_CONFIG, _v03_delete_push_config(handler, v03_context), methods=["DELETE"])
    ]
    for route in sdk_routes:
        if isinstance(route, Route) and route.path == V03_SEND:
            route = Route(route.path, v03_file_bytes_in(route.endpoint), methods=route.methods)
        elif isinstance(route, Route) and route.path == V03_STREAM:
            stream = v03_file_bytes_in(checked_stream_start(route.endpoint))
            route = Route(route.path, stream, methods=route.methods)
        elif isinstance(route, Route) and route.path == V03_SUBSCRIBE:
            subscribe = _v03_subscribe(route.endpoint, handler, v03_context)
            route = Route(route.path, subscribe, methods=route.methods)
        elif isinstance(route, Route) and route.path == V03_GET_TASK:
            route = Route(route.path, checked_history_length(route.endpoint), methods=route.methods)
        if isinstance(route, Route) and route.path in V03_WITH_MESSAGES:
            route.app = v03_file_bytes_out(route.app)
        if isinstance(route, Route) and route.path in SENDS:
            # Changed in place: the SDK's /{tenant} mount serves the same route objects.
            route.app = request_response(_checked_role(route.endpoint))
        routes.append(route)
    return routes


def _checked_role(sdk_endpoint: Callable[..., Any]) -> Endpoint:
    """``sdk_endpoint`` (1.0 send or stream), refusing an unknown role by name first."""

    @rest_error_handler
    async def endpoint(request: Request) -> Response:
        try:
            document = json.loads(await request.body())
        except (ValueError, RecursionError):
            document = None  # the SDK answers what is wrong with it
        error = role_error(document)
        if error is not None:
            raise error
        response: Response = await sdk_endpoint(request)
        return response

    return endpoint


def _v03_delete_push_config(
    handler: RequestHandler, context_builder: V03ServerCallContextBuilder
) -> Endpoint:
    @validate_version(PROTOCOL_VERSION_0_3)
    async def delete(task_id: str, config_id: str, context: ServerCallContext) -> None:
        await handler.on_delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id), context
        )

    @rest_error_handler
    async def endpoint(request: Request) -> Response:
        context = context_builder.build(request)
        await delete(request.path_params["id"], request.path_params["push_id"], context)
        return JSONResponse({})

    return endpoint


def _v03_subscribe(
    sdk_endpoint: Callable[..., Any],
    handler: RequestHandler,
    context_builder: V03ServerCallContextBuilder,
) -> Endpoint:
    @validate_version(PROTOCOL_VERSION_0_3)
    async def check(task_id: str, context: ServerCallContext) -> None:
        task = await handler.on_get_task(GetTaskRequest(id=task_id), context)
        if task is None:
            raise TaskNotFoundError
        if task.status.state in TERMINAL_STATES:
            raise UnsupportedOperationError(
                message=f"Task {task_id} is in terminal state: {TaskState.Name(task.status.state)}"
            )

    @rest_error_handler
    async def endpoint(request: Request) -> Response:
        await check(request.path_params["id"], context_builder.build(request))
        response: Response = await sdk_endpoint(request)
        return response

    return endpoint


def _short(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
