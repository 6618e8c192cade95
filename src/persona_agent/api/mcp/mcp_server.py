"""Personas as MCP tools: the hub's MCP server, at ``/mcp`` (streamable HTTP) and on stdio
(``persona-agent mcp``), on the ``mcp`` SDK's own server and session manager (docs/mcp.md).

A tool call is an A2A task of the persona, admitted and run as an A2A call is
(:mod:`.mcp_turns`). Its answer is the tool's text; its ``contextId`` is the
conversation id a later call passes to continue. Each persona's agent card is a resource.
Handshake-era sessions are held to the caller that opened each (:mod:`.mcp_sessions`);
on replicas there are none, and any replica answers (:mod:`.mcp_stateless`). A 401 tells
a client where to sign in, or what to send (:mod:`.mcp_auth`).
Built on first use by :mod:`.mcp_door` (what it imports is not small).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import mcp.types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from persona_agent import __version__
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.api.mcp.mcp_answers import (
    text_result,
)
from persona_agent.api.mcp.mcp_auth import METADATA_PATH, public_url, unauthorized
from persona_agent.api.mcp.mcp_changes import ListChanges
from persona_agent.api.mcp.mcp_door import MCP_PATH
from persona_agent.api.mcp.mcp_sdk_fixes import quiet_session_ids
from persona_agent.api.mcp.mcp_sessions import McpSessions, handshake_era
from persona_agent.api.mcp.mcp_stateless import (
    CallsInFlight,
    StatelessFront,
    listen_for_cancels,
)
from persona_agent.api.mcp.mcp_tools import (
    ASK_TOOL,
    CARD_TEMPLATE,
    LIST_TOOL,
    McpToolDesign,
    ToolInputError,
    ask_tools,
    card_contents,
    card_page,
    card_templates,
    check_arguments,
    listing,
    page_offset,
    persona_of_uri,
    persona_tool,
    persona_tool_schema,
    tool_argument,
)
from persona_agent.api.mcp.mcp_turns import ToolTurns
from persona_agent.personas.model import Persona
from persona_agent.personas.stores.store import PersonaStore
from persona_agent.security.principal import AuthError, Principal

if TYPE_CHECKING:
    from persona_agent.cluster import Cluster

__all__ = ["McpPersonas"]

PAGE = 500
"""Resources (and persona tools) a page of a list holds."""

Params = TypeVar("Params")
Result = TypeVar("Result")


class _HubServer(Server[Any]):
    """The SDK's low-level server, telling handshake-era clients that its tool and resource
    lists change (2026-07-28 clients learn it from ``subscriptions/listen`` being served),
    unless it is stateless (``announces``: no stream to tell them on)."""

    announces = True

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        changes = notification_options or NotificationOptions(
            tools_changed=self.announces, resources_changed=self.announces
        )
        return super().create_initialization_options(changes, experimental_capabilities, extensions)


class McpPersonas:
    """The hub's MCP server: the personas a caller may call, as tools and resources.

    ``design`` and ``persona_tools_max``: which tools (:mod:`.mcp_tools`); ``max_body_bytes``:
    the largest request body (413 above); ``local_headers``: the credentials of a caller with
    no HTTP request (stdio), as ASGI headers; ``store``: the persona store whose changes
    are announced (``list_changed``); ``sessions_per_caller``, ``sessions_max``,
    ``session_idle_timeout`` and ``session_max_age``: the handshake era's sessions
    (:mod:`.mcp_sessions`); ``http_sessions``: whether there are any (``auto``: none on
    replicas, ``cluster`` given; :mod:`.mcp_stateless`); ``public_base_url`` and
    ``oidc``: a 401 names the protected-resource metadata when the hub takes OIDC
    tokens (:mod:`.mcp_auth`).
    """

    def __init__(
        self,
        registry: A2ARegistry,
        *,
        design: McpToolDesign = "auto",
        persona_tools_max: int = 10,
        max_body_bytes: int = 1024 * 1024,
        local_headers: list[tuple[bytes, bytes]] | None = None,
        store: PersonaStore | None = None,
        sessions_per_caller: int = 16,
        sessions_max: int = 1000,
        session_idle_timeout: float = 1800.0,
        session_max_age: float = 86_400.0,
        http_sessions: Literal["auto", "stateful", "stateless"] = "auto",
        cluster: Cluster | None = None,
        public_base_url: str | None = None,
        oidc: bool = False,
    ) -> None:
        self._registry = registry
        self._store = store
        self._public_base_url = public_base_url
        self._oidc = oidc
        self._design: McpToolDesign = design
        self._tools_max = persona_tools_max
        self._local_scope: Scope = {
            "type": "stdio",
            "headers": local_headers or [],
            "client": ("127.0.0.1", 0),
        }
        self.changes = ListChanges(store)
        """Who to tell when the personas change (:meth:`ListChanges.changed`)."""
        self.server = _HubServer(
            "persona-agent",
            version=__version__,
            title="persona-agent",
            instructions="Each tool asks one of this hub's personas (or ask_persona asks the "
            "one you name). Pass the conversation_id of an answer to continue that conversation.",
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._used(self._list_tools),
            on_call_tool=self._used(self._call_tool),
            on_list_resources=self._used(self._list_resources),
            on_list_resource_templates=self._used(self._list_templates),
            on_read_resource=self._used(self._read_resource),
            on_subscriptions_listen=self.changes.listen,
        )
        quiet_session_ids()
        self._cluster = cluster
        stateless = http_sessions == "stateless" or (
            http_sessions == "auto" and cluster is not None
        )
        self.server.announces = not stateless
        self.manager = StreamableHTTPSessionManager(
            self.server,
            stateless=stateless,
            max_request_body_size=max_body_bytes,
            # Backstops: the sessions' own limits are the guard's, closer.
            session_idle_timeout=max(session_idle_timeout, session_max_age),
            max_sessions=sessions_max + sessions_per_caller,
        )
        """Serves ``/mcp``; its ``run()`` is entered by :meth:`running`."""
        self.sessions = McpSessions(
            self.manager,
            per_caller=sessions_per_caller,
            total=sessions_max,
            idle_timeout=session_idle_timeout,
            max_age=session_max_age,
            on_close=self.changes.forget,
            on_refuse=self._session_refused,
        )
        """The handshake era's sessions, each held to its caller, in front of ``manager``."""
        self.calls = CallsInFlight(cluster.announce if cluster is not None else None)
        """The tool calls running here that a handshake-era cancel may name."""
        self._turns = ToolTurns(registry, self.calls)
        self._front = (
            StatelessFront(self.manager.handle_request, self.calls, max_body_bytes=max_body_bytes)
            if stateless
            else None
        )

    # -- life --------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager runs; every persona change is announced to the clients."""
        unsubscribe = self.changes.subscribe()
        if self._cluster is not None and self._front is not None:
            await listen_for_cancels(self._cluster, self.calls)
        try:
            async with self.manager.run(), self.sessions.running():
                yield
                self.changes.listen.close()
        finally:
            unsubscribe()
            self.changes.close()

    def _session_refused(self, caller: str, status: int, message: str) -> None:
        principal = None if caller.startswith("ip:") else caller
        audit = self._registry.services.audit
        audit.record(
            "mcp.session.refused", principal=principal, outcome=str(status), reason=message
        )

    def _heard(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Keep a handshake-era session, to tell it of persona changes later."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or self._front is not None:
            return
        key = _session_id(ctx) if isinstance(ctx.request, Request) else "stdio"
        if key:
            self.changes.heard(key, ctx.session)

    # -- HTTP --------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``/mcp``: a caller with a credential that is not valid, or with none where the
        hub's access is ``authenticated``, is answered 401 (:mod:`.mcp_auth`); the others'
        sessions are held to them (:mod:`.mcp_sessions`), or there are none
        (:mod:`.mcp_stateless`)."""
        if scope["type"] != "http":
            await self.manager.handle_request(scope, receive, send)
            return
        principal: Principal | None = None
        auth = self._registry.services.auth
        if auth is not None:
            try:
                principal = await auth.principal(scope["headers"])
                if principal is None and auth.default_access == "authenticated":
                    raise AuthError(
                        401, "Authentication required (Authorization: Bearer ..., or X-API-Key)"
                    )
            except AuthError as error:
                metadata = METADATA_PATH + MCP_PATH
                where = public_url(scope, self._public_base_url, metadata) if self._oidc else None
                await unauthorized(error, where)(scope, receive, send)
                return
        # The caller as the admission and the rate limits name it (Admission.check).
        client = scope.get("client")
        caller = principal.name if principal else f"ip:{client[0] if client else 'unknown'}"
        if self._front is not None and handshake_era(scope):
            await self._front.handle(caller, scope, receive, send)
            return
        await self.sessions.handle(caller, scope, receive, send)

    # -- who calls ---------------------------------------------------------

    async def act_as(self, api_key: str | None) -> str:
        """Calls with no HTTP request (stdio) are made with ``api_key`` (``None``: as an
        anonymous caller on this machine): who that is.

        Raises:
            AuthError: the key is not one of the hub's.
        """
        headers = [(b"x-api-key", api_key.encode("latin-1"))] if api_key else []
        auth = self._registry.services.auth
        principal = await auth.principal(headers) if auth is not None and headers else None
        if api_key and principal is None:
            raise AuthError(401, "The API key is not one of the hub's (PERSONA_AGENT_API_KEYS)")
        self._local_scope = {**self._local_scope, "headers": headers}
        return principal.name if principal is not None else "anonymous"

    def _scope(self, ctx: ServerRequestContext[Any, Any]) -> Scope:
        request = ctx.request
        return request.scope if isinstance(request, Request) else self._local_scope

    async def _principal(self, ctx: ServerRequestContext[Any, Any]) -> Principal | None:
        auth = self._registry.services.auth
        if auth is None:
            return None
        try:
            return await auth.principal(self._scope(ctx)["headers"])
        except AuthError as error:
            raise MCPError(types.INVALID_REQUEST, error.message) from None

    async def _visible(self, ctx: ServerRequestContext[Any, Any]) -> list[Persona]:
        """The personas the caller may call, by id."""
        self._heard(ctx)
        return self._registry.callable_by(await self._principal(ctx))

    def _used(
        self,
        handler: Callable[[ServerRequestContext[Any, Any], Params], Awaitable[Result]],
    ) -> Callable[[ServerRequestContext[Any, Any], Params], Awaitable[Result]]:
        """``handler``, a use of the caller's session while it runs (pings and open
        streams are none: :meth:`.McpSessions.working`)."""

        async def used(ctx: ServerRequestContext[Any, Any], params: Params) -> Result:
            with self.sessions.working(_session_id(ctx)):
                return await handler(ctx, params)

        return used

    def _persona_tools(self, count: int) -> bool:
        return self._design == "persona" or (self._design == "auto" and count <= self._tools_max)

    # -- tools -------------------------------------------------------------

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's input schema, without listing the tools (the 2026-07-28 header check)."""
        if name == ASK_TOOL:
            return ask_tools()[0].input_schema
        if name == LIST_TOOL:
            return ask_tools()[1].input_schema
        return persona_tool_schema() if name in self._registry else None

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        personas = await self._visible(ctx)
        if not self._persona_tools(len(personas)):
            return types.ListToolsResult(tools=ask_tools())
        tools = []
        for persona in personas:
            app = self._registry.get(persona.id)
            if app is not None:
                tools.append(persona_tool(persona.id, app.card))
        return types.ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """A tool of no persona is a JSON-RPC error (-32602); arguments that do not fit
        the tool are its result, ``isError`` (:class:`.ToolInputError`)."""
        arguments = params.arguments or {}
        schema = self._input_schema(params.name)
        if schema is None:
            raise MCPError(types.INVALID_PARAMS, await self._no_persona(ctx, params.name))
        try:
            check_arguments(arguments, schema)
            if params.name == LIST_TOOL:
                query = tool_argument(arguments, "query", required=False)
                entries = []
                for visible in await self._visible(ctx):
                    app = self._registry.get(visible.id)
                    if app is not None:
                        entries.append((visible.id, app.card))
                return text_result(listing(entries, query))
            persona_id = params.name
            if params.name == ASK_TOOL:
                persona_id = tool_argument(arguments, "persona", required=True)
            persona = self._registry.persona(persona_id)
            if persona is None:
                raise ToolInputError(await self._no_persona(ctx, persona_id))
            message = tool_argument(arguments, "message", required=True)
            conversation = tool_argument(arguments, "conversation_id", required=False)
        except ToolInputError as error:
            return text_result(str(error), error=True)
        return await self._turns.ask(ctx, self._scope(ctx), persona, message, conversation)

    async def _no_persona(self, ctx: ServerRequestContext[Any, Any], persona_id: str) -> str:
        """No persona of this id: the personas the caller may call (as its tool list has
        them, never the others)."""
        known = ", ".join(p.id for p in (await self._visible(ctx))[:20]) or "none"
        return f"No persona '{persona_id[:80]}' here (personas: {known}; {LIST_TOOL} lists them)"

    # -- resources ---------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        personas = await self._visible(ctx)
        offset = page_offset(params)
        cards = [(p.id, app.card) for p in personas if (app := self._registry.get(p.id))]
        return card_page(cards, offset, PAGE)

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return card_templates()

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        persona_id = persona_of_uri(uri)
        visible = {persona.id for persona in await self._visible(ctx)}
        app = self._registry.get(persona_id) if persona_id in visible and persona_id else None
        if app is None:
            raise MCPError(types.INVALID_PARAMS, f"No resource '{uri}' (try {CARD_TEMPLATE})")
        return card_contents(uri, app.card_dict)


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The handshake-era session of a request over HTTP (``None``: stdio, 2026-07-28)."""
    request = ctx.request
    return request.headers.get(MCP_SESSION_ID_HEADER) if isinstance(request, Request) else None
