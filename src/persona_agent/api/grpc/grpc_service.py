"""The hub's A2A gRPC service: every persona on one service, chosen by the request's tenant.

A2A 1.0 gives every request a ``tenant`` field, and the SDK's client fills it from the
card interface's ``tenant``: each persona's card lists the hub's gRPC address with its
own id as the tenant, so one server and one port serve ten thousand personas (no
service or port per persona). The hub's card lists the directory agent there with the
tenant ``_directory``. An empty tenant is refused (``INVALID_ARGUMENT``) with a message
that says which tenant to send: a client that ignored the persona's card would otherwise
get the directory's answer, which reads like the persona's failure.

The ``a2a-version`` metadata is checked first, as the HTTP bindings check the header:
this service (``lf.a2a.v1.A2AService``) is A2A 1.0's, so ``1``, ``1.0``, ``1.0.1`` are
served, any other value is VersionNotSupported (``FAILED_PRECONDITION`` with the reason
``VERSION_NOT_SUPPORTED``, the SDK's table), and none at all is read as 1.0: a 0.3
client calls another service (``a2a.v1.A2AService``), so on this one the absent value
cannot mean 0.3.

Each call is admitted here first, in an async step of its own (the SDK's context builder
is synchronous, and the hub's authenticator may fetch OIDC keys): the caller from its
metadata (``x-api-key``, ``authorization: Bearer``), the same authorization decision,
rate and concurrency limits, audit and metrics as the HTTP bindings
(:class:`~persona_agent.a2a.admission.Admission`). The call then goes through the SDK's
:class:`GrpcHandler` to the hub's :class:`~persona_agent.a2a.forwarding.PersonaRequestHandler`,
whose call context carries the persona, the principal and the binding ``grpc``.

A2A 0.3's gRPC service has no tenant (its requests name only the task), so a 0.3 client
could not say which persona it calls: it is not served (0.3 clients use JSON-RPC or
HTTP+JSON, which every card lists for 0.3).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

import grpc
import grpc.aio
from a2a.auth.user import UnauthenticatedUser, User
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.grpc_handler import GrpcHandler, GrpcServerCallContextBuilder
from a2a.server.routes.common import StarletteUser
from a2a.types import a2a_pb2_grpc
from a2a.utils.errors import A2AError, InvalidRequestError, VersionNotSupportedError
from google.protobuf import message
from opentelemetry import context as otel_context

from persona_agent.a2a.admission import Admission, Refusal
from persona_agent.a2a.cards import DIRECTORY_TENANT
from persona_agent.a2a.context_keys import (
    BINDING_KEY,
    CALLER_KEY,
    PERSONA_STATE_KEY,
    PRINCIPAL_STATE_KEY,
    REQUEST_ID_KEY,
)
from persona_agent.a2a.forwarding import SECRET_HEADERS
from persona_agent.a2a.services import HubServices
from persona_agent.observe.logs import LOG_FIELDS, bind_log_fields
from persona_agent.observe.tracing import active as tracing_active
from persona_agent.observe.tracing import remote_context
from persona_agent.personas.model import Persona
from persona_agent.security.audit import request_id_of
from persona_agent.security.principal import Principal

__all__ = ["GRPC_BINDING", "HubGrpcService", "grpc_status_of", "version_refusal"]

logger = logging.getLogger(__name__)

GRPC_BINDING = "grpc"
"""The binding label of gRPC calls (request metrics)."""

T = TypeVar("T")

_CALL: ContextVar[dict[str, Any]] = ContextVar("persona_agent.grpc_call")
"""What the admission found about the call being served (caller, principal, persona):
read by the context builder, which the SDK calls synchronously in the same task."""

_KINDS = {"SendMessage": "send", "SendStreamingMessage": "stream", "SubscribeToTask": "subscribe"}
"""The calls that limits count, by kind (:meth:`Admission.held`)."""

_STATUS_CODES = {
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


_SERVED_VERSION = re.compile(r"1(\.\d{1,9}){0,2}")
"""The ``a2a-version`` values this service serves: A2A 1.x in digits (``1``, ``1.0``,
``1.0.1``), as the SDK serves on HTTP any 1.x (which also takes forms like ``1.0rc1``)."""

_NO_TENANT = (
    "The request has no tenant, which names the agent it is for: send the tenant of the "
    "card's gRPC interface (a persona's id: the a2a-sdk client does when made from the "
    "persona's card; GET /a2a/personas lists the personas and their cards), or the tenant "
    f"'{DIRECTORY_TENANT}' for the hub's directory agent"
)


def version_refusal(version: str | None) -> VersionNotSupportedError | None:
    """The refusal of a call whose ``a2a-version`` metadata is ``version`` (None: served)."""
    if not version or _SERVED_VERSION.fullmatch(version.strip()):
        return None
    shown = version if len(version) <= 40 else version[:40] + "..."
    return VersionNotSupportedError(
        message=(
            f"A2A version '{shown}' is not supported over gRPC: this service "
            "(lf.a2a.v1.A2AService) is A2A 1.0, send the metadata a2a-version: 1.0 "
            "(A2A 0.3 clients use JSON-RPC or HTTP+JSON, which every card lists for 0.3)"
        )
    )


def grpc_status_of(http_status: int) -> grpc.StatusCode:
    """The gRPC status of a refusal the HTTP bindings answer with ``http_status``."""
    return _STATUS_CODES.get(http_status, grpc.StatusCode.INVALID_ARGUMENT)


class ServedApp(Protocol):
    """What the service needs of a persona's app (``registry.PersonaApp``)."""

    @property
    def persona(self) -> Persona: ...


class _ContextBuilder(GrpcServerCallContextBuilder):
    """The call context of an admitted call: its persona, caller, principal and binding,
    and the metadata as headers (credentials left out: the SDK logs call contexts)."""

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        call = _CALL.get()
        headers: dict[str, str] = call["headers"]
        principal = call.get("user")
        user: User = (
            StarletteUser(principal) if isinstance(principal, Principal) else UnauthenticatedUser()
        )
        state: dict[str, Any] = {
            "headers": {k: v for k, v in headers.items() if k not in SECRET_HEADERS},
            PERSONA_STATE_KEY: call["persona_id"],
            REQUEST_ID_KEY: call.get(REQUEST_ID_KEY),
            CALLER_KEY: call.get(CALLER_KEY),
            BINDING_KEY: GRPC_BINDING,
        }
        if isinstance(principal, Principal):
            state[PRINCIPAL_STATE_KEY] = principal
            state["auth"] = call.get("auth")
        extensions = headers.get(HTTP_EXTENSION_HEADER.lower())
        return ServerCallContext(
            user=user,
            state=state,
            requested_extensions=get_requested_extensions([extensions] if extensions else []),
        )


class _HubGrpcHandler(GrpcHandler):
    """The SDK's handler; a refusal of the hub's authorization (Invalid request with the
    HTTP status 401, 403 or 404 in its data) becomes that status's gRPC code."""

    async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
        data = error.data if isinstance(error, InvalidRequestError) else None
        status = data.get("httpStatus") if isinstance(data, dict) else None
        if isinstance(status, int) and status in _STATUS_CODES:
            await context.abort(_STATUS_CODES[status], error.message)
        await super().abort_context(error, context)


class HubGrpcService(a2a_pb2_grpc.A2AServiceServicer):
    """``lf.a2a.v1.A2AService`` for every persona (the request's tenant) and the directory
    (the tenant ``_directory``), admitted as the HTTP bindings admit."""

    def __init__(
        self,
        lookup: Callable[[str, str | None], ServedApp | None],
        personas: RequestHandler,
        directory: RequestHandler,
        services: HubServices,
    ) -> None:
        """``lookup``: the registry's; ``personas``: the forwarding handler every persona's
        call goes through; ``directory``: the directory agent's handler."""
        self._lookup = lookup
        builder = _ContextBuilder()
        self._personas = _HubGrpcHandler(personas, context_builder=builder)
        self._directory = _HubGrpcHandler(directory, context_builder=builder)
        self._admission = Admission(services)
        self._log_fields = services.log_fields
        self._audited = services.audit.enabled
        self._idle_seconds = services.stream_idle_seconds
        """A stream with nothing to send this long is ended (0: never), as on HTTP."""

    # -- admission ---------------------------------------------------------------------

    @asynccontextmanager
    async def _admitted(
        self, method: str, request: message.Message, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[GrpcHandler]:
        """The SDK handler to serve the call with, the call admitted (else aborted with the
        refusal's status), traced under the caller's trace context, with its log fields."""
        headers = _headers(context)
        refused = version_refusal(headers.get("a2a-version"))
        if refused is not None:
            await self._directory.abort_context(refused, context)
        tenant = str(getattr(request, "tenant", ""))
        if not tenant:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _NO_TENANT)
        served = None if tenant == DIRECTORY_TENANT else self._lookup(tenant, None)
        if served is None and tenant != DIRECTORY_TENANT:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"No persona with id '{tenant}' on this hub (the request's tenant names the "
                "persona): GET /a2a/personas lists them, or send the tenant "
                f"'{DIRECTORY_TENANT}' to ask the hub's directory agent",
            )
        if served is None:
            tenant = ""  # the directory: no persona (its calls are labelled as on HTTP)
        persona = served.persona if served is not None else None
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        call: dict[str, Any] = {"headers": headers, "persona_id": tenant}
        # A request id is for the audit log and JSON log lines alone (as on HTTP).
        call[REQUEST_ID_KEY] = request_id_of(raw) if self._audited or self._log_fields else None
        parent = remote_context(raw) if tracing_active() else None
        traced = otel_context.attach(parent) if parent is not None else None
        fields = (
            bind_log_fields(request_id=call[REQUEST_ID_KEY], persona=tenant)
            if self._log_fields
            else None
        )
        token = _CALL.set(call)
        try:
            refusal = await self._admission.check(persona, raw, _client(context), call)
            if refusal is not None:
                await _abort(context, refusal)
            async with self._admission.held(persona, _KINDS.get(method), call) as refusal:
                if refusal is not None:
                    await _abort(context, refusal)
                yield self._personas if persona is not None else self._directory
        finally:
            # A stream closed from another context (a generator finalized at shutdown)
            # cannot reset them there; its own context ends with it.
            with contextlib.suppress(ValueError):
                _CALL.reset(token)
                if fields is not None:
                    LOG_FIELDS.reset(fields)
            if traced is not None:
                otel_context.detach(traced)

    async def _unary(
        self,
        method: str,
        request: message.Message,
        context: grpc.aio.ServicerContext,
    ) -> Any:
        async with self._admitted(method, request, context) as handler:
            serve: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
            serve = getattr(handler, method)
            return await _internal_errors(context, serve(request, context))

    async def _stream(
        self, method: str, request: message.Message, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async with self._admitted(method, request, context) as handler:
            events: AsyncGenerator[Any, None] = getattr(handler, method)(request, context)
            idle = self._idle_seconds or None
            try:
                async with aclosing(events):
                    while True:
                        try:
                            async with asyncio.timeout(idle):
                                event = await anext(events)
                        except StopAsyncIteration:
                            return
                        except TimeoutError:
                            # As on HTTP: the stream ends, the task goes on (resubscribe).
                            logger.info("Ended a gRPC stream idle for %.0f s", idle)
                            return
                        yield event
            except (grpc.aio.AbortError, A2AError):
                raise
            except Exception:
                logger.exception("gRPC %s failed", method)
                await context.abort(grpc.StatusCode.INTERNAL, "Internal error")

    # -- lf.a2a.v1.A2AService ------------------------------------------------------------

    async def SendMessage(self, request: Any, context: Any) -> Any:
        return await self._unary("SendMessage", request, context)

    async def SendStreamingMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        # An async generator function: how grpc tells a stream (not a function returning one).
        async for event in self._stream("SendStreamingMessage", request, context):
            yield event

    async def GetTask(self, request: Any, context: Any) -> Any:
        return await self._unary("GetTask", request, context)

    async def ListTasks(self, request: Any, context: Any) -> Any:
        return await self._unary("ListTasks", request, context)

    async def CancelTask(self, request: Any, context: Any) -> Any:
        return await self._unary("CancelTask", request, context)

    async def SubscribeToTask(self, request: Any, context: Any) -> AsyncIterator[Any]:
        # An async generator function: how grpc tells a stream (not a function returning one).
        async for event in self._stream("SubscribeToTask", request, context):
            yield event

    async def CreateTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary("CreateTaskPushNotificationConfig", request, context)

    async def GetTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary("GetTaskPushNotificationConfig", request, context)

    async def ListTaskPushNotificationConfigs(self, request: Any, context: Any) -> Any:
        return await self._unary("ListTaskPushNotificationConfigs", request, context)

    async def DeleteTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary("DeleteTaskPushNotificationConfig", request, context)

    async def GetExtendedAgentCard(self, request: Any, context: Any) -> Any:
        return await self._unary("GetExtendedAgentCard", request, context)


async def _internal_errors(context: grpc.aio.ServicerContext, call: Awaitable[T]) -> T:
    """``await call``; an error that is no A2A error is logged and answered INTERNAL with no
    detail (grpc would send its text as the status message)."""
    try:
        return await call
    except (grpc.aio.AbortError, A2AError):
        raise
    except Exception:
        logger.exception("gRPC call failed")
        await context.abort(grpc.StatusCode.INTERNAL, "Internal error")
        raise  # abort raised already: not reached


async def _abort(context: grpc.aio.ServicerContext, refusal: Refusal) -> None:
    """Answer ``refusal`` (401 → UNAUTHENTICATED, 403 → PERMISSION_DENIED, 429 →
    RESOURCE_EXHAUSTED), its headers (``www-authenticate``, ``retry-after``) as trailers."""
    context.set_trailing_metadata(tuple((k.lower(), v) for k, v in refusal.headers.items()))
    await context.abort(grpc_status_of(refusal.status), refusal.message)


def _headers(context: grpc.aio.ServicerContext) -> dict[str, str]:
    """The call's text metadata by lower-case name (binary ``-bin`` entries left out)."""
    metadata = context.invocation_metadata() or ()
    return {
        str(key).lower(): value
        for key, value in metadata
        if isinstance(value, str) and not str(key).endswith("-bin")
    }


def _client(context: grpc.aio.ServicerContext) -> tuple[str, int] | None:
    """The client's address from the peer (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``)."""
    peer = context.peer() or ""
    kind, _, address = peer.partition(":")
    if kind not in ("ipv4", "ipv6") or not address:
        return None
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port) if port.isdigit() else 0
