"""A2ARegistry: persona id -> PersonaApp, and the ASGI router mounted at ``/a2a``.

The router dispatches by the first path segment with a dict lookup, so ten
thousand personas route as fast as one. Adding, replacing or removing a
persona swaps one dict entry: a request already under way keeps the
PersonaApp it started on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from functools import cached_property
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import AgentCard, CancelTaskRequest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from persona_agent.a2a.agent_card import CARD_PATH, build_agent_card
from persona_agent.a2a.executor import PersonaAgentExecutor
from persona_agent.a2a.keys import PERSONA_SCOPE_KEY, RPC_BODY_SCOPE_KEY, TERMINAL_STATES
from persona_agent.a2a.routing import (
    MAX_ID_LENGTH,
    PersonaContextBuilder,
    PersonaRequestHandler,
    TaskListing,
)
from persona_agent.a2a.sdk_fixes.jsonrpc_body import (
    INVALID_REQUEST,
    PARSE_ERROR,
    MessageTooLargeError,
    jsonrpc_error,
    parse_body,
    read_body,
    replay,
)
from persona_agent.a2a.sdk_fixes.routes import jsonrpc_dispatcher, rest_routes
from persona_agent.chat.engine import ChatEngine
from persona_agent.personas.model import Persona
from persona_agent.personas.store import PersonaChange

__all__ = ["A2ARegistry", "PersonaApp", "not_found_response"]

logger = logging.getLogger(__name__)

CARD_CACHE_CONTROL = "public, max-age=60, must-revalidate"


class PersonaApp:
    """Everything that serves one persona over A2A.

    The card and the SDK handler are built on first use, so that start-up with
    thousands of personas costs little time and memory for those never called.
    """

    def __init__(
        self, persona: Persona, base_url: str, engine: ChatEngine, task_store: TaskStore
    ) -> None:
        self.persona = persona
        self.executor = PersonaAgentExecutor(persona, engine)
        self._base_url = base_url
        self._task_store = task_store

    @cached_property
    def card(self) -> AgentCard:
        return build_agent_card(self.persona, self._base_url)

    @cached_property
    def card_dict(self) -> dict[str, Any]:
        return agent_card_to_dict(self.card)

    @cached_property
    def card_etag(self) -> str:
        body = json.dumps(self.card_dict, sort_keys=True, separators=(",", ":"))
        return f'W/"{hashlib.sha256(body.encode()).hexdigest()[:32]}"'

    @cached_property
    def handler(self) -> DefaultRequestHandler:
        return DefaultRequestHandler(
            agent_executor=self.executor,
            task_store=self._task_store,
            agent_card=self.card,
            validate_input_modes=True,
        )

    @property
    def started(self) -> bool:
        """Whether the SDK handler exists (a request has reached this persona)."""
        return "handler" in self.__dict__


def _labelled_json(scope: Scope) -> bool:
    """Whether a request's body is labelled JSON (``application/json``, or a ``+json`` type
    such as ``application/a2a+json``), or is empty (``tasks/{id}:cancel``): a web page's
    form cannot send such a body to another site without the browser asking first (CORS),
    which the hub never allows."""
    headers = dict(scope["headers"])
    content_type = headers.get(b"content-type")
    if content_type is None:
        return b"transfer-encoding" not in headers and headers.get(b"content-length", b"0") == b"0"
    media: bytes = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


def _not_json_response(rest: str) -> JSONResponse:
    message = "Content-Type must be application/json (or application/a2a+json)"
    if rest == "":  # JSON-RPC: Invalid Request, with the HTTP status that says why
        return JSONResponse(
            {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}},
            status_code=415,
        )
    return JSONResponse(
        {"error": {"code": 415, "status": "INVALID_ARGUMENT", "message": message}},
        status_code=415,
    )


def not_found_response(persona_id: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": {
                "code": "persona_not_found",
                "message": f"No persona with id '{persona_id}'",
            }
        },
        status_code=404,
    )


class _ParsedRequest(Request):
    """A request whose JSON body the registry has already read and parsed."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, parsed: Any) -> None:
        super().__init__(scope, receive, send)
        self._parsed = parsed

    async def json(self) -> Any:
        return self._parsed


class A2ARegistry:
    """The live set of personas served over A2A."""

    def __init__(
        self,
        *,
        engine: ChatEngine,
        task_store: TaskStore,
        base_url: str,
        max_message_bytes: int = 1024 * 1024,
        shutdown_grace_period: float = 0,
        task_listing: TaskListing = "context",
        max_id_length: int = MAX_ID_LENGTH,
    ) -> None:
        """``task_listing``, ``max_id_length``: see :class:`PersonaRequestHandler`."""
        self._engine = engine
        self.max_message_bytes = max_message_bytes
        self.shutdown_grace_period = shutdown_grace_period
        self._task_store = task_store
        self.base_url = base_url
        self._apps: dict[str, PersonaApp] = {}
        self._retired: dict[str, list[PersonaApp]] = {}
        """Replaced apps whose tasks still run: cancel and subscribe must reach them."""
        handler = PersonaRequestHandler(
            self.app_for, task_listing=task_listing, max_id_length=max_id_length
        )
        builder = PersonaContextBuilder()
        self._jsonrpc = jsonrpc_dispatcher(
            handler, context_builder=builder, shutdown_grace_period=shutdown_grace_period
        )
        """Serves every JSON-RPC call (a POST to ``{persona_id}/``), called directly."""
        routes: list[BaseRoute] = [
            Route(CARD_PATH, self._card_endpoint, methods=["GET"]),
            # Reached only by other methods than POST (405), see __call__.
            Route("/", self._jsonrpc.handle_requests, methods=["POST"]),
            *rest_routes(
                handler,
                context_builder=builder,
                shutdown_grace_period=shutdown_grace_period,
            ),
        ]
        self._routes_app = Starlette(routes=routes)

    # -- the registry -------------------------------------------------------

    def __len__(self) -> int:
        return len(self._apps)

    def __contains__(self, persona_id: object) -> bool:
        return persona_id in self._apps

    def get(self, persona_id: str) -> PersonaApp | None:
        return self._apps.get(persona_id)

    def personas(self) -> list[Persona]:
        return [app.persona for app in sorted(self._apps.values(), key=lambda a: a.persona.id)]

    def apps(self) -> list[PersonaApp]:
        return [self._apps[key] for key in sorted(self._apps)]

    def put(self, persona: Persona) -> PersonaApp:
        """Add a persona, or replace it: new requests see the new one at once.

        Tasks already running on the old definition finish on it: they hold
        the old PersonaApp, which is dropped when they are done.
        """
        app = self._build(persona)
        old = self._apps.get(persona.id)
        self._apps[persona.id] = app
        if old is not None and old.executor.running:
            self._retired.setdefault(persona.id, []).append(old)
        return app

    def app_for(self, persona_id: str, task_id: str | None = None) -> PersonaApp | None:
        """The app serving a persona; for a task still running on a replaced
        definition, the app running it."""
        current = self._apps.get(persona_id)
        if task_id and persona_id in self._retired:
            retired = [a for a in self._retired[persona_id] if a.executor.running]
            if retired:
                self._retired[persona_id] = retired
            else:
                del self._retired[persona_id]
            for app in retired:
                if task_id in app.executor.running:
                    return app if current is not None else None
        return current

    def remove(self, persona_id: str) -> bool:
        """Stop serving a persona: its endpoints answer 404 at once.

        Tasks already running finish on the app they started on.
        """
        return self._apps.pop(persona_id, None) is not None

    def apply(self, change: PersonaChange) -> None:
        """Follow a persona store: subscribe this to it and every change goes live."""
        if change.persona is not None:
            self.put(change.persona)
        else:
            self.remove(change.persona_id)

    def _build(self, persona: Persona) -> PersonaApp:
        return PersonaApp(persona, self.base_url, self._engine, self._task_store)

    async def aclose(self) -> None:
        """Stop serving: let running tasks finish, cancel the rest, close every handler.

        Tasks still running after ``shutdown_grace_period`` seconds are canceled
        through the SDK (they end ``canceled``, and streaming clients see it)
        rather than left ``working`` by a bare handler close.
        """
        apps = [*self._apps.values(), *(a for old in self._retired.values() for a in old)]
        self._apps.clear()
        self._retired.clear()
        in_flight = [
            (app, task_id, call_context)
            for app in apps
            for task_id, call_context in app.executor.running.items()
        ]
        if in_flight:
            logger.info(
                "Waiting up to %ss for %d running task(s)",
                self.shutdown_grace_period,
                len(in_flight),
            )
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.shutdown_grace_period):
                for _app, task_id, call_context in in_flight:
                    await self._wait_terminal(task_id, call_context)
        for app, task_id, call_context in in_flight:
            if await self._is_terminal(task_id, call_context):
                continue
            logger.warning("Canceling task %s of %s at shutdown", task_id, app.persona.id)
            try:
                await app.handler.on_cancel_task(CancelTaskRequest(id=task_id), call_context)
            except Exception:
                logger.exception("Could not cancel task %s at shutdown", task_id)
        await asyncio.gather(
            *(app.handler.aclose() for app in apps if app.started), return_exceptions=True
        )

    async def _is_terminal(self, task_id: str, call_context: ServerCallContext) -> bool:
        task = await self._task_store.get(task_id, call_context)
        return task is not None and task.status.state in TERMINAL_STATES

    async def _wait_terminal(self, task_id: str, call_context: ServerCallContext) -> None:
        """Poll the store until the task is terminal: its final state is durable then."""
        while True:
            if await self._is_terminal(task_id, call_context):
                return
            await asyncio.sleep(0.05)

    # -- the ASGI side ------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``{persona_id}/...`` below the mount point; an unknown id is a JSON 404."""
        root: str = scope.get("root_path", "")
        path: str = scope["path"]
        relative = (path[len(root) :] if path.startswith(root) else path).lstrip("/")
        persona_id, _, rest = relative.partition("/")
        if self._apps.get(persona_id) is None:
            await not_found_response(persona_id)(scope, receive, send)
            return
        inner = dict(scope)
        persona_root = f"{root}/{persona_id}"
        inner["root_path"] = persona_root
        inner["path"] = f"{persona_root}/{rest}"
        inner[PERSONA_SCOPE_KEY] = persona_id
        if scope["type"] == "http" and scope["method"] == "POST":
            if not _labelled_json(scope):
                await _not_json_response(rest)(scope, receive, send)
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
                await self._too_large_response(rest, error.message)(scope, receive, send)
                return
            receive = replay(body, receive)
            if rest == "":  # JSON-RPC: unparseable bodies get the spec's Parse error
                parsed, problem = parse_body(body)
                if problem is not None:
                    await jsonrpc_error(PARSE_ERROR, problem)(scope, receive, send)
                    return
                inner[RPC_BODY_SCOPE_KEY] = parsed
                # Straight to the SDK's dispatcher, as its route would call it, minus
                # Starlette's routing and middleware (~4 % of a call's CPU) and a
                # second parse of the body.
                request = _ParsedRequest(inner, receive, send, parsed)
                response = await self._jsonrpc.handle_requests(request)
                await response(inner, receive, send)
                return
        await self._routes_app(inner, receive, send)

    def _too_large(self, scope: Scope, rest: str) -> Response | None:
        """A clear error for a body whose declared length is over the limit."""
        headers = dict(scope["headers"])
        try:
            length = int(headers.get(b"content-length", b"0"))
        except ValueError:
            return None
        if length <= self.max_message_bytes:
            return None
        return self._too_large_response(
            rest, f"Message too large: {length} bytes, the limit is {self.max_message_bytes}"
        )

    @staticmethod
    def _too_large_response(rest: str, message: str) -> Response:
        if rest == "":  # the JSON-RPC endpoint: a JSON-RPC error (Invalid Request)
            return jsonrpc_error(INVALID_REQUEST, message)
        return JSONResponse(
            {"error": {"code": 413, "status": "PAYLOAD_TOO_LARGE", "message": message}},
            status_code=413,
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

    async def _card_endpoint(self, request: Request) -> Response:
        app = self._apps.get(request.scope.get(PERSONA_SCOPE_KEY, ""))
        if app is None:
            return not_found_response(request.scope.get(PERSONA_SCOPE_KEY, ""))
        headers = {"ETag": app.card_etag, "Cache-Control": CARD_CACHE_CONTROL}
        if_none_match = request.headers.get("if-none-match", "")
        tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
        if "*" in tags or app.card_etag.removeprefix("W/") in tags:
            return Response(status_code=304, headers=headers)
        return JSONResponse(app.card_dict, headers=headers)
