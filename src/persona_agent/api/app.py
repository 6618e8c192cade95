"""create_app(settings): the app factory, the parts built in order and the app serving them.

The builders are api/assembly.py and api/serving.py; the lifespan enters each part through one
AsyncExitStack, so parts close in the reverse order they were built.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from persona_agent import __version__
from persona_agent.a2a.cards import A2A_PREFIX
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.a2a.sdk_fixes.untraced import drop_idle_tracing
from persona_agent.api.assembly import (
    Part,
    Protection,
    Storage,
    build_collaboration,
    build_engine,
    build_knowledge_part,
    build_model_backend,
    build_protection,
    build_storage,
    build_telemetry,
)
from persona_agent.api.caller_data import CallerData
from persona_agent.api.deps import ApiParts
from persona_agent.api.grpc_server import build_grpc
from persona_agent.api.mcp_auth import metadata_routes
from persona_agent.api.mcp_door import MCP_PATH, McpDoor
from persona_agent.api.openai import OPENAI_PREFIX, OpenAIDoor
from persona_agent.api.pages import add_pages
from persona_agent.api.readiness import Readiness
from persona_agent.api.rest_auth import UPLOAD_HEADER, is_loopback
from persona_agent.api.routes import (
    caller_documents,
    conversation_files,
    conversations,
    discovery,
    memories,
    operations,
    persona_documents,
    persona_files,
    persona_usage,
    personas,
    user_personas,
)
from persona_agent.api.serving import build_a2a, build_personas_live
from persona_agent.chat.engine import ChatEngine
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.conversations.storage_quota import StorageLimits, StorageQuota
from persona_agent.errors import HTTP_STATUSES, PersonaAgentError
from persona_agent.parts import build_memory_records, persona_limits
from persona_agent.personas.formats.card_pngs import CardPngs
from persona_agent.security.body_limits import BodyLimit
from persona_agent.security.host_guard import HostGuard
from persona_agent.settings import Settings

__all__ = ["HubApp", "cors_options", "create_app"]


def _conversations(
    settings: Settings, storage: Storage, engine: ChatEngine, registry: A2ARegistry
) -> ConversationStore:
    """The stored conversations callers steer, each caller within its storage quota
    (anonymous conversations too, on a hub that identifies callers)."""
    limits = StorageLimits(
        conversations=settings.caller_max_conversations,
        messages=settings.caller_max_messages,
        bytes=settings.caller_max_message_bytes,
        anonymous_is_a_caller=registry.services.auth is not None,
    )
    quota = StorageQuota(storage.writer, limits)
    return ConversationStore(storage.writer, storage.history, locks=engine.locks, quota=quota)


def create_app(settings: Settings) -> HubApp:
    """The hub as an ASGI app. Its parts are built here in the order they start in its
    lifespan (storage first), which closes them the other way round."""
    telemetry = build_telemetry(settings)
    metrics = telemetry.metrics
    storage = build_storage(settings, metrics)
    model = build_model_backend(settings)
    collaboration = build_collaboration(settings, metrics)
    knowledge = build_knowledge_part(settings, storage, model)
    engine = build_engine(settings, model, storage, collaboration, metrics, knowledge)
    protection = build_protection(settings)
    a2a = build_a2a(settings, engine, storage, collaboration, protection, metrics, knowledge.reader)
    grpc = build_grpc(settings, a2a)
    drop_idle_tracing()  # the SDK's server parts are loaded: no no-op span a call
    replica = storage.cluster.replica if storage.cluster is not None else None
    readiness = Readiness(storage.writer, a2a.registry, model.llm, replica=replica)
    live = build_personas_live(
        settings, storage, a2a, model.llm, collaboration, readiness, knowledge
    )
    mcp = McpDoor(a2a.registry, storage.personas, cluster=storage.cluster, **_mcp_options(settings))
    parts = ApiParts(
        auth=protection.api_auth,
        store=storage.personas,
        registry=a2a.registry,
        limits=persona_limits(settings),
        audit=protection.audit,
        card_pngs=CardPngs(settings.card_png_cache_bytes),
        persona_data=storage.persona_data,
        usage=storage.usage,
        signer=protection.signer,
        metrics=metrics,
        readiness=readiness,
        caller_data=CallerData(
            build_memory_records(storage.writer, engine.memory),
            storage.history,
            storage.lean_store,
            knowledge.store,
            storage.user_personas,
        ),
        knowledge=knowledge,
        user_personas=storage.user_personas,
        conversations=_conversations(settings, storage, engine, a2a.registry),
        engine=engine,
    )
    origins = settings.cors_origin_list
    app = HubApp(
        parts,
        a2a=CORSMiddleware(a2a.registry, **cors_options(origins)) if origins else a2a.registry,
        guard=_host_guard(settings, protection),
        mcp=mcp,
        serve_mcp=settings.mcp_server,
        openai=_openai_door(settings, a2a.registry),
        title="persona-agent",
        version=__version__,
        description="A multi-persona A2A hub.",
        lifespan=_lifespan(
            [
                telemetry,
                storage,
                model,
                collaboration,
                engine.summary,
                protection,
                a2a,
                grpc,
                live,
                mcp,
            ]
        ),
        docs_url=None,  # /docs and /redoc: add_pages, with files served by the hub
        redoc_url=None,
    )
    _add_routes(app, settings)
    return app


def _lifespan(parts: Sequence[Part]) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the parts in order; close them (those started) in the reverse order."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for part in parts:
                await stack.enter_async_context(part.running())
            yield

    return lifespan


def _add_routes(app: HubApp, settings: Settings) -> None:
    """Discovery, operations, the REST API, the pages, A2A mounted under ``/a2a`` and MCP at
    ``/mcp``; each
    error of :data:`~persona_agent.errors.HTTP_STATUSES` answered with its status."""
    app.add_middleware(BodyLimit, limits=persona_limits(settings))
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
    CORS when origins are allowed (a chat page in a browser may call it, as A2A)."""
    if not settings.openai_server:
        return None
    door = OpenAIDoor(
        registry,
        max_body_bytes=settings.max_message_bytes,
        max_messages=settings.openai_max_messages,
    )
    origins = settings.cors_origin_list
    return CORSMiddleware(door, **cors_options(origins)) if origins else door


def _mcp_options(settings: Settings) -> dict[str, Any]:
    """The MCP server's settings (:class:`~persona_agent.api.mcp_server.McpPersonas`)."""
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


def _host_guard(settings: Settings, protection: Protection) -> Callable[[ASGIApp], ASGIApp]:
    """The Host and Origin rules (:mod:`.host_guard`) in front of an app: the Host rule on
    a hub that listens on loopback and that nobody can authenticate to."""

    def guard(app: ASGIApp) -> ASGIApp:
        return HostGuard(
            app,
            check_host=is_loopback(settings.host) and not protection.authenticator.enabled,
            listen_host=settings.host,
            allowed_hosts=settings.allowed_host_list,
            own_origins=[settings.public_base_url or ""],
            cors_origins=settings.cors_origin_list,
            audit=protection.audit,
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
