"""The ASGI router mounted at ``/a2a``: ``{persona_id}/...`` to that persona's app.

It dispatches by the first path segment with a dict lookup, so ten thousand
personas route as fast as one; admits the caller (:mod:`persona_agent.a2a.admission`);
checks what the SDK leaves to the server before a body reaches it (JSON label: 415,
size: 413, unparseable JSON-RPC: -32700; the answers: :mod:`persona_agent.a2a.calls`);
and serves every persona through one shared set of SDK routes (DESIGN.md: a few KiB a
persona instead of a Starlette app each). ``/a2a/`` itself is the hub's directory
agent (:mod:`persona_agent.a2a.discovery.directory`), with SDK routes of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from a2a.server.request_handlers import RequestHandler
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from opentelemetry import context as otel_context
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from persona_agent.a2a.admission import Admission
from persona_agent.a2a.calls import (
    CARD_CACHE_CONTROL,
    ParsedRequest,
    call_kind,
    card_response,
    first_segments,
    is_public,
    labelled_json,
    not_found_response,
    not_json_response,
    too_large_response,
)
from persona_agent.a2a.cards import ASSETS_PATH, AVATAR_PATH, CARD_PATH
from persona_agent.a2a.context_keys import (
    BINDING_KEY,
    PERSONA_SCOPE_KEY,
    REQUEST_ID_KEY,
    RPC_BODY_SCOPE_KEY,
)
from persona_agent.a2a.discovery.directory import HubDirectory
from persona_agent.a2a.forwarding import (
    MAX_ID_LENGTH,
    PersonaContextBuilder,
    PersonaRequestHandler,
    TaskListing,
)
from persona_agent.a2a.sdk_fixes.jsonrpc_body import (
    PARSE_ERROR,
    MessageTooLargeError,
    jsonrpc_error,
    parse_body,
    read_body,
)
from persona_agent.a2a.sdk_fixes.numbers import whole_counts
from persona_agent.a2a.sdk_fixes.routes import jsonrpc_dispatcher, rest_routes
from persona_agent.a2a.services import HubServices
from persona_agent.observe.logs import LOG_FIELDS, bind_log_fields
from persona_agent.observe.tracing import active as tracing_active
from persona_agent.observe.tracing import remote_context
from persona_agent.personas.model import Persona
from persona_agent.security.audit import request_id_of
from persona_agent.security.ingress.body_limits import replay

# AVATAR_PATH, CARD_CACHE_CONTROL, card_response and not_found_response: :mod:`.calls`'s,
# named here too for the modules that have them from here.
__all__ = [
    "AVATAR_PATH",
    "CARD_CACHE_CONTROL",
    "A2ARouter",
    "ServedPersona",
    "card_response",
    "not_found_response",
]

logger = logging.getLogger(__name__)


class ServedPersona(Protocol):
    """What the router needs of a persona's app (``registry.PersonaApp``)."""

    @property
    def persona(self) -> Persona: ...

    @property
    def handler(self) -> RequestHandler: ...

    @property
    def card_dict(self) -> dict[str, Any]: ...

    @property
    def card_etag(self) -> str: ...

    @property
    def sees_images(self) -> bool: ...

    @property
    def output_modes(self) -> Sequence[str]: ...


class _RouteSet:
    """One set of SDK routes: the JSON-RPC dispatcher (called directly) and the rest."""

    __slots__ = ("app", "jsonrpc")

    def __init__(self, jsonrpc: JsonRpcDispatcher, app: Starlette) -> None:
        self.jsonrpc = jsonrpc
        self.app = app


class A2ARouter:
    """Serves ``{persona_id}/...``: the persona's card, JSON-RPC and HTTP+JSON.

    ``lookup(persona_id, task_id)`` gives the app serving a persona (for a task
    still running on a replaced definition, the app running it), or None.

    With a ``directory``, ``/a2a/`` itself is the hub's directory agent: its JSON-RPC
    endpoint, its card at ``.well-known/agent-card.json`` and its HTTP+JSON paths
    (``message:send``, ``tasks/...``, ``v1/...``). A persona comes first: one whose id is
    such a path's first segment (``tasks``, ``v1``) hides that path of the directory.
    """

    def __init__(
        self,
        lookup: Callable[[str, str | None], ServedPersona | None],
        *,
        max_message_bytes: int = 1024 * 1024,
        shutdown_grace_period: float = 0,
        task_listing: TaskListing = "context",
        max_id_length: int = MAX_ID_LENGTH,
        services: HubServices | None = None,
        directory: HubDirectory | None = None,
    ) -> None:
        """``task_listing``, ``max_id_length``: see :class:`PersonaRequestHandler`;
        ``services``: who may call, limits, audit, avatars, idle streams; ``directory``:
        the agent served at ``/a2a/`` itself (none: a 404 there)."""
        services = services or HubServices()
        self._audited = services.audit.enabled
        self._log_fields = services.log_fields
        self._admission = Admission(services)
        self.stream_idle_seconds = services.stream_idle_seconds
        self._lookup = lookup
        self._avatars = services.avatars
        self._assets = services.assets
        self.max_message_bytes = max_message_bytes
        handler = PersonaRequestHandler(
            lookup,
            task_listing=task_listing,
            max_id_length=max_id_length,
            metrics=services.metrics,
            authorization=services.authorization,
            parts=services.parts,
        )
        self._builder = PersonaContextBuilder()
        self._grace = shutdown_grace_period
        self._routes = self._route_set(
            handler,
            Route(CARD_PATH, self._card_endpoint, methods=["GET"]),
            Route(AVATAR_PATH, self._avatar_endpoint, methods=["GET"]),
            Route(ASSETS_PATH + "/{path:path}", self._asset_endpoint, methods=["GET"]),
        )
        """Serves every persona: the JSON-RPC dispatcher is called directly."""
        self._directory = directory
        self._directory_routes: _RouteSet | None = None
        self._directory_segments: frozenset[str] = frozenset()
        if directory is not None:
            self._directory_routes = self._route_set(
                directory.handler, Route(CARD_PATH, self._directory_card, methods=["GET"])
            )
            self._directory_segments = first_segments(self._directory_routes.app.routes)

    def _route_set(self, handler: RequestHandler, *first: BaseRoute) -> _RouteSet:
        """The SDK's JSON-RPC and HTTP+JSON routes (corrected: :mod:`.sdk_fixes.routes`)
        for ``handler``, after the routes ``first`` (the card route goes before the REST
        routes, whose ``/{tenant}`` mount would take it)."""
        dispatcher = jsonrpc_dispatcher(
            handler, context_builder=self._builder, shutdown_grace_period=self._grace
        )
        routes: list[BaseRoute] = [
            *first,
            # Reached only by other methods than POST (405), see __call__.
            Route("/", dispatcher.handle_requests, methods=["POST"]),
            *rest_routes(handler, context_builder=self._builder, shutdown_grace_period=self._grace),
        ]
        return _RouteSet(dispatcher, Starlette(routes=routes))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``{persona_id}/...`` below the mount point; an unknown id is a JSON 404."""
        root: str = scope.get("root_path", "")
        path: str = scope["path"]
        relative = (path[len(root) :] if path.startswith(root) else path).lstrip("/")
        persona_id, _, rest = relative.partition("/")
        served = self._lookup(persona_id, None)
        persona: Persona | None
        if served is not None:
            persona, routes = served.persona, self._routes
        elif self._directory_routes is not None and persona_id in self._directory_segments:
            persona, routes, persona_id, rest = None, self._directory_routes, "", relative
        else:
            await not_found_response(persona_id)(scope, receive, send)
            return
        inner = dict(scope)
        inner[BINDING_KEY] = "jsonrpc" if rest == "" else "http+json"
        # A request id is for the audit log and JSON log lines alone.
        if self._audited or self._log_fields:
            inner[REQUEST_ID_KEY] = request_id_of(scope["headers"])
        # Traced: the caller's W3C trace context is the parent of the request's spans.
        parent = remote_context(scope["headers"]) if tracing_active() else None
        if not self._log_fields and parent is None:
            await self._serve(persona, persona_id, rest, routes, scope, inner, receive, send)
            return
        fields = (
            bind_log_fields(request_id=inner[REQUEST_ID_KEY], persona=persona_id)
            if self._log_fields
            else None
        )
        traced = otel_context.attach(parent) if parent is not None else None
        try:
            await self._serve(persona, persona_id, rest, routes, scope, inner, receive, send)
        finally:
            if traced is not None:
                otel_context.detach(traced)
            if fields is not None:
                LOG_FIELDS.reset(fields)

    async def _serve(
        self,
        persona: Persona | None,
        persona_id: str,
        rest: str,
        routes: _RouteSet,
        scope: Scope,
        inner: dict[str, Any],
        receive: Receive,
        send: Send,
    ) -> None:
        """Serve a call to ``persona`` (``None``: the directory, at the root itself)."""
        root: str = scope.get("root_path", "")
        if not is_public(rest):
            refusal = await self._admission.admit(persona, rest, scope, inner)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        persona_root = f"{root}/{persona_id}" if persona_id else root
        inner["root_path"] = persona_root
        inner["path"] = f"{persona_root}/{rest}"
        inner[PERSONA_SCOPE_KEY] = persona_id
        if scope["type"] == "http" and scope["method"] == "POST":
            if not labelled_json(scope):
                await not_json_response(rest)(scope, receive, send)
                return
            too_large = self._too_large(scope, rest)
            if too_large is not None:
                await too_large(scope, receive, send)
                return
            # The body is read here, within the size limit, whatever its framing: a
            # chunked one over it gets the same answer as a declared one.
            try:
                body = await read_body(self._limited(receive))
            except MessageTooLargeError as error:
                await too_large_response(rest, error.message)(scope, receive, send)
                return
            receive = replay(body, receive)
            if rest == "":  # JSON-RPC: unparseable bodies get the spec's Parse error
                parsed, problem = parse_body(body)
                if problem is not None:
                    await jsonrpc_error(PARSE_ERROR, problem)(scope, receive, send)
                    return
                inner[RPC_BODY_SCOPE_KEY] = parsed
                method = parsed.get("method") if isinstance(parsed, dict) else None
                async with self._admission.counted(persona, rest, method, inner) as refusal:
                    if refusal is not None:
                        await refusal(scope, receive, send)
                        return

                    async def json_rpc(send: Send) -> None:
                        # Straight to the SDK's dispatcher, as its route would call it,
                        # minus Starlette's routing and middleware (~4 % of a call's CPU)
                        # and a second parse of the body.
                        request = ParsedRequest(inner, receive, send, parsed)
                        response = await routes.jsonrpc.handle_requests(request)
                        await response(inner, receive, send)

                    await self._served(call_kind(rest, method), json_rpc, send)
                return
        async with self._admission.counted(persona, rest, None, inner) as refusal:
            if refusal is not None:
                await refusal(scope, receive, send)
                return

            async def rest_call(send: Send) -> None:
                await routes.app(inner, receive, send)

            await self._served(call_kind(rest, None), rest_call, send)

    async def _served(
        self, kind: str | None, serve: Callable[[Send], Awaitable[None]], send: Send
    ) -> None:
        """Serve the call (the cost-v1 counts of its answer written as integers); a stream
        that has sent nothing but keep-alive pings for ``stream_idle_seconds`` is ended (the
        task goes on: resubscribe to follow it)."""
        send = whole_counts(send)
        idle = self.stream_idle_seconds
        if kind not in ("stream", "subscribe") or idle <= 0:
            await serve(send)
            return
        last = time.monotonic()
        started = ended = False

        async def watched(message: Message) -> None:
            nonlocal last, started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body":
                body = message.get("body", b"")
                if body and not body.lstrip().startswith(b":"):  # ": ping" is not news
                    last = time.monotonic()
                ended = not message.get("more_body", False)
            await send(message)

        call = asyncio.ensure_future(serve(watched))
        try:
            while not call.done():
                await asyncio.wait({call}, timeout=min(idle / 4, 5.0))
                if not call.done() and time.monotonic() - last > idle:
                    call.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await call
                    logger.info("Ended a stream idle for %.0f s", idle)
                    if started and not ended:
                        await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
            call.result()
        finally:
            if not call.done():  # this request was canceled (the client went): so is the call
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await call

    def _too_large(self, scope: Scope, rest: str) -> Response | None:
        """A clear error for a body whose declared length is over the limit."""
        headers = dict(scope["headers"])
        try:
            length = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return None
        if length <= self.max_message_bytes:
            return None
        return too_large_response(
            rest, f"Message too large: {length} bytes, the limit is {self.max_message_bytes}"
        )

    def _limited(self, receive: Receive) -> Receive:
        """``receive`` that stops a body (say, chunked) once it outgrows the limit."""
        seen = 0
        limit = self.max_message_bytes

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise MessageTooLargeError(
                        f"Message too large: over the limit of {limit} bytes"
                    )
            return message

        return limited_receive

    async def _avatar_endpoint(self, request: Request) -> Response:
        persona_id = request.scope.get(PERSONA_SCOPE_KEY, "")
        image = await self._avatars(persona_id) if self._avatars is not None else None
        if image is None:
            return JSONResponse(
                {
                    "error": {
                        "code": 404,
                        "status": "NOT_FOUND",
                        "message": f"Persona '{persona_id}' has no avatar",
                    }
                },
                status_code=404,
            )
        etag = f'"{image.etag}"'
        headers = {"ETag": etag, "Cache-Control": CARD_CACHE_CONTROL}
        tags = [
            tag.strip().removeprefix("W/")
            for tag in request.headers.get("if-none-match", "").split(",")
        ]
        if "*" in tags or etag in tags:
            return Response(status_code=304, headers=headers)
        return Response(image.data, media_type=image.media_type, headers=headers)

    async def _asset_endpoint(self, request: Request) -> Response:
        """A CHARX asset of the persona, served as its avatar is (the same routes' access),
        as the media type its extension names (never one a browser would run), not to be
        sniffed as another."""
        persona_id = request.scope.get(PERSONA_SCOPE_KEY, "")
        path = str(request.path_params.get("path", ""))
        asset = await self._assets(persona_id, path) if self._assets is not None else None
        if asset is None:
            message = f"Persona '{persona_id}' has no asset '{path[:200]}'"
            error = {"code": 404, "status": "NOT_FOUND", "message": message}
            return JSONResponse({"error": error}, status_code=404)
        headers = {
            "Cache-Control": CARD_CACHE_CONTROL,
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
        }
        return Response(asset.data, media_type=asset.media_type, headers=headers)

    async def _card_endpoint(self, request: Request) -> Response:
        app = self._lookup(request.scope.get(PERSONA_SCOPE_KEY, ""), None)
        if app is None:
            return not_found_response(request.scope.get(PERSONA_SCOPE_KEY, ""))
        return card_response(request, app.card_dict, app.card_etag)

    async def _directory_card(self, request: Request) -> Response:
        assert self._directory is not None
        return card_response(request, self._directory.card_dict, self._directory.card_etag)
