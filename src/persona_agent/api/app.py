"""create_app(settings): the hub's parts (built by :mod:`persona_agent.hub`) served over HTTP.

The parts come from :func:`~persona_agent.hub.composition.build_hub`; here are the HTTP app,
its routes and middleware, the doors (gRPC, ``/mcp``) and the lifespan that runs the hub
(its parts, then the doors) through one AsyncExitStack.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from persona_agent import __version__
from persona_agent.a2a.cards import A2A_PREFIX
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.api.caller_data import CallerData
from persona_agent.api.deps import ApiParts
from persona_agent.api.grpc.grpc_server import build_grpc
from persona_agent.api.mcp.mcp_auth import metadata_routes
from persona_agent.api.mcp.mcp_door import MCP_PATH, McpDoor
from persona_agent.api.openai import OPENAI_PREFIX
from persona_agent.api.pages import CONSOLE_PATH, add_pages
from persona_agent.api.rest_auth import UPLOAD_HEADER, ApiAuth
from persona_agent.api.routes import (
    caller_documents,
    discovery,
    memories,
    operations,
    persona_documents,
    persona_files,
    persona_usage,
    personas,
    user_personas,
)
from persona_agent.api.routes.chats import conversation_files, conversation_prompts, conversations
from persona_agent.errors import HTTP_STATUSES, PersonaAgentError
from persona_agent.hub.composition import Hub, Part, build_hub
from persona_agent.hub.memory_part import build_memory_records
from persona_agent.llm.base import LLMBackend
from persona_agent.personas.formats.card_pngs import CardPngs
from persona_agent.security.audit import AuditLog
from persona_agent.security.ingress.body_limits import BodyLimit
from persona_agent.security.ingress.host_guard import HostGuard
from persona_agent.settings import Settings

__all__ = ["HubApp", "build_mcp_door", "cors_options", "create_app"]

logger = logging.getLogger(__name__)


def create_app(settings: Settings) -> HubApp:
    """The hub as an ASGI app: its parts (:func:`~persona_agent.hub.composition.build_hub`),
    its doors (gRPC, MCP), and the HTTP app serving them; the lifespan starts the parts, then
    the doors, and closes them the other way round."""
    hub = build_hub(settings)
    grpc = build_grpc(settings, hub.a2a)
    mcp = build_mcp_door(settings, hub)
    origins = settings.cors_origin_list
    registry = hub.registry
    parts = _api_parts(settings, hub)
    app = HubApp(
        parts,
        a2a=CORSMiddleware(registry, **cors_options(origins)) if origins else registry,
        guard=_host_guard(settings, parts.auth, hub.protection.audit),
        mcp=mcp,
        serve_mcp=settings.mcp_server,
        openai=_openai_door(settings, registry),
        title="persona-agent",
        version=__version__,
        description="A multi-persona A2A hub.",
        lifespan=_lifespan(settings, hub, [grpc, mcp], parts.auth),
        docs_url=None,  # /docs and /redoc: add_pages, with files served by the hub
        redoc_url=None,
    )
    _add_routes(app, settings)
    return app


def build_mcp_door(settings: Settings, hub: Hub) -> McpDoor:
    """The personas as MCP tools (``/mcp``, and ``persona-agent mcp`` on stdio)."""
    storage = hub.storage
    return McpDoor(
        hub.registry, storage.personas, cluster=storage.cluster, **_mcp_options(settings)
    )


def _api_parts(settings: Settings, hub: Hub) -> ApiParts:
    """What the REST routes are given: the hub's parts, and the REST API's own checks of
    who may call (:class:`~persona_agent.api.rest_auth.ApiAuth`)."""
    storage, protection = hub.storage, hub.protection
    api_auth = ApiAuth(
        protection.authenticator,
        listen_host=settings.host,
        allowed_origins=settings.cors_origin_list,
        audit=protection.audit,
    )
    return ApiParts(
        auth=api_auth,
        store=storage.personas,
        registry=hub.registry,
        limits=storage.persona_limits,
        audit=protection.audit,
        card_pngs=CardPngs(settings.card_png_cache_bytes),
        persona_data=storage.persona_data,
        persona_assets=storage.persona_assets,
        usage=storage.usage,
        signer=protection.signer,
        metrics=hub.metrics,
        readiness=hub.readiness,
        caller_data=CallerData(
            build_memory_records(storage.writer, hub.engine.memory),
            storage.history,
            storage.lean_store,
            hub.knowledge.store,
            storage.user_personas,
        ),
        knowledge=hub.knowledge,
        user_personas=storage.user_personas,
        conversations=hub.conversations,
        engine=hub.engine,
    )


def _lifespan(
    settings: Settings, hub: Hub, doors: Sequence[Part], api_auth: ApiAuth
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Run the hub's parts, then the doors; close them (those started) the other way round."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with hub.running(*doors):
            _log_startup(settings, hub.model.llm, hub.registry, api_auth.listens_on_loopback)
            yield

    return lifespan


def _add_routes(app: HubApp, settings: Settings) -> None:
    """Discovery, operations, the REST API, the pages, A2A mounted under ``/a2a`` and MCP at
    ``/mcp``; each
    error of :data:`~persona_agent.errors.HTTP_STATUSES` answered with its status."""
    app.add_middleware(BodyLimit, limits=app.parts.limits)
    app.include_router(discovery.router)
    app.include_router(operations.router)
    for module in (
        personas,
        persona_files,
        persona_usage,
        memories,
        caller_documents,
        persona_documents,
        conversation_files,
        conversation_prompts,
        user_personas,
        conversations,
    ):
        app.include_router(module.router, prefix="/api/v1")
    add_pages(app, app.parts.registry, console=settings.console)
    for error_type, code in HTTP_STATUSES.items():
        app.add_exception_handler(error_type, _status_handler(code))
    origins = settings.cors_origin_list
    if origins:  # off by default: no browser page of another origin may call the hub
        app.add_middleware(CORSMiddleware, **cors_options(origins))
    app.router.routes.append(Mount(A2A_PREFIX, app=app.a2a))
    if settings.mcp_server:  # reached this way behind a proxy's root path (HubApp.serve)
        methods = ["GET", "POST", "DELETE"]
        app.router.routes.append(Route(MCP_PATH, endpoint=app.mcp, methods=methods))
        if settings.oidc_issuer:  # MCP clients find where to sign in (RFC 9728)
            routes = metadata_routes(settings.oidc_issuer, settings.public_base_url, MCP_PATH)
            app.router.routes.extend(routes)
    if app.openai is not None:  # reached this way behind a proxy's root path
        app.router.routes.append(Mount(OPENAI_PREFIX, app=app.openai))


def _openai_door(settings: Settings, registry: A2ARegistry) -> ASGIApp | None:
    """The OpenAI-compatible door at ``/v1`` (docs/openai.md), unless it is off; behind
    CORS when origins are allowed (a chat page in a browser may call it, as A2A). Its
    modules are imported, and the door built, by its first request (docs/performance.md)."""
    if not settings.openai_server:
        return None
    built: list[ASGIApp] = []

    async def door(scope: Scope, receive: Receive, send: Send) -> None:
        if not built:
            from persona_agent.api.openai.completions_door import OpenAIDoor

            built.append(
                OpenAIDoor(
                    registry,
                    max_body_bytes=settings.max_message_bytes,
                    max_messages=settings.openai_max_messages,
                )
            )
        await built[0](scope, receive, send)

    origins = settings.cors_origin_list
    return CORSMiddleware(door, **cors_options(origins)) if origins else door


def _mcp_options(settings: Settings) -> dict[str, Any]:
    """The MCP server's settings (:class:`~persona_agent.api.mcp.mcp_server.McpPersonas`)."""
    return {
        "design": settings.mcp_tools,
        "persona_tools_max": settings.mcp_persona_tools_max,
        "max_body_bytes": settings.max_message_bytes,
        "sessions_per_caller": settings.mcp_sessions_per_caller,
        "sessions_max": settings.mcp_sessions_max,
        "session_idle_timeout": settings.mcp_session_idle_timeout,
        "session_max_age": settings.mcp_session_max_age,
        "http_sessions": settings.mcp_http_sessions,
        "public_base_url": settings.public_base_url,
        "oidc": settings.oidc_issuer is not None,
    }


def _host_guard(
    settings: Settings, api_auth: ApiAuth, audit: AuditLog
) -> Callable[[ASGIApp], ASGIApp]:
    """The Host and Origin rules (:mod:`.host_guard`) in front of an app: the Host rule on
    a hub open to this machine (:attr:`ApiAuth.open_to_this_machine`: it listens on loopback
    and nobody can authenticate to it), as the REST API's keyless writes are."""

    def guard(app: ASGIApp) -> ASGIApp:
        return HostGuard(
            app,
            check_host=api_auth.open_to_this_machine,
            listen_host=settings.host,
            allowed_hosts=settings.allowed_host_list,
            own_origins=[settings.public_base_url or ""],
            cors_origins=settings.cors_origin_list,
            audit=audit,
            a2a_prefix=A2A_PREFIX,
        )

    return guard


class HubApp(FastAPI):
    """The FastAPI app, with the A2A endpoints served by the registry directly.

    ``/a2a/{persona_id}/...`` skips FastAPI's middleware and router (a fifth of
    the hub's own CPU per A2A request); the registry is still mounted, so the
    routes are the same whichever way a request comes in.
    """

    def __init__(
        self,
        parts: ApiParts,
        *,
        a2a: ASGIApp,
        guard: Callable[[ASGIApp], ASGIApp],
        mcp: McpDoor,
        serve_mcp: bool = True,
        openai: ASGIApp | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.parts = parts
        """What the routes are given (:mod:`.deps`)."""
        self.mcp = mcp
        """The personas as MCP tools: at ``/mcp`` when ``serve_mcp``, and for ``persona-agent
        mcp`` (stdio)."""
        self.serve_mcp = serve_mcp
        self.openai = openai
        """The personas as models at ``/v1`` (``None``: not served)."""
        self.a2a = a2a
        """The registry, behind CORS when origins are allowed."""
        self.guarded = guard(self.serve)
        """:meth:`serve` behind the Host and Origin rules (:mod:`.host_guard`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.guarded(scope, receive, send)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Every route: A2A straight to the registry, ``/mcp`` to the MCP server, ``/v1`` to
        the OpenAI-compatible door, the rest through FastAPI."""
        # Behind a proxy's root path, the mount takes it (it knows how to strip it).
        if scope["type"] == "http" and not scope.get("root_path"):
            path: str = scope["path"]
            if path.startswith(_A2A_PATH) and path != _PERSONA_LIST_PATH:
                await self.a2a({**scope, "root_path": A2A_PREFIX}, receive, send)
                return
            if path == MCP_PATH and self.serve_mcp:
                await self.mcp(scope, receive, send)
                return
            if path.startswith(_OPENAI_PATH) and self.openai is not None:
                await self.openai(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


_A2A_PATH = f"{A2A_PREFIX}/"
_PERSONA_LIST_PATH = f"{A2A_PREFIX}/personas"
_OPENAI_PATH = f"{OPENAI_PREFIX}/"


def cors_options(origins: list[str]) -> dict[str, Any]:
    """CORS for the allowed origins: the methods and headers of A2A and the REST API;
    credentials are headers (Authorization, X-API-Key), never cookies."""
    return {
        "allow_origins": origins,
        "allow_methods": ["GET", "POST", "PUT", "DELETE"],
        "allow_headers": [
            "Authorization",
            "X-API-Key",
            "Content-Type",
            "If-Match",
            "If-None-Match",
            "A2A-Version",
            "A2A-Extensions",
            UPLOAD_HEADER,
        ],
        "expose_headers": ["ETag", "Location", "Retry-After", "WWW-Authenticate"],
        "max_age": 600,
    }


def _status_handler(code: int) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def handle(_request: Request, error: Exception) -> Response:
        message = error.message if isinstance(error, PersonaAgentError) else str(error)
        return JSONResponse({"detail": message}, status_code=code)

    return handle


def _log_startup(
    settings: Settings, llm: LLMBackend, registry: A2ARegistry, on_loopback: bool
) -> None:
    """What the hub serves, who may call it (``on_loopback``: it listens on loopback only,
    as the REST API's checks decided), its memory and its model."""
    logger.info("Serving %d persona(s) at %s%s/{id}/", len(registry), settings.base_url, A2A_PREFIX)
    if settings.console:
        logger.info("Web console: %s%s/", settings.base_url, CONSOLE_PATH)
    auth = registry.services.auth  # None when nobody can authenticate
    if auth is None:
        if not on_loopback:
            logger.warning(
                "No API keys or OIDC issuer are configured and the hub listens on %s: every "
                "persona answers anyone over A2A, /api/v1 reads are open and every write is "
                "refused. Set PERSONA_AGENT_API_KEYS (docs/security.md).",
                settings.host,
            )
        else:  # the default start: open to this machine alone, nothing to warn of
            logger.info(
                "Open to this machine: no API keys, so /api/v1 writes are taken only from "
                "loopback (no other origin); set PERSONA_AGENT_API_KEYS to require a key "
                "(docs/security.md)"
            )
    else:
        logger.info(
            "A2A access: %s by default (a persona's access: overrides); /api/v1 needs credentials",
            auth.default_access,
        )
    _log_memory(settings.memory, identifies=auth is not None)
    if llm.name == "local":
        logger.info(
            "LLM backend: local, the embedded model %s%s (no key needed; set "
            "PERSONA_AGENT_LLM_BASE_URL to use an OpenAI-compatible server: docs/local-model.md)",
            llm.default_model,
            f" from {llm.where}" if llm.where else "",
        )
    else:
        where = f" at {llm.where}" if llm.where else ""
        logger.info("LLM backend: %s%s, model %s", llm.name, where, llm.default_model)


def _log_memory(on: bool, identifies: bool) -> None:
    """Say, when memory is on, whom it is for: a hub that identifies nobody remembers
    within one conversation only (docs/memory.md)."""
    if not on:
        return
    if identifies:
        logger.info(
            "Memory is on: a caller with an API key or OIDC token is remembered across its "
            "conversations, an anonymous caller within one conversation (docs/memory.md)"
        )
    else:
        logger.info(
            "Memory is on, within one conversation at a time: no API keys or OIDC issuer "
            "are configured, so every caller is anonymous and a new conversation remembers "
            "nothing of the last (set PERSONA_AGENT_API_KEYS: docs/memory.md)"
        )
