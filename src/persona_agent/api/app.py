"""create_app(settings): the whole object graph, built in one place."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import literal, select
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from persona_agent import __version__
from persona_agent.a2a.cards import (
    A2A_PREFIX,
    CARD_PATH,
    provider,
)
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.a2a.router import card_response
from persona_agent.a2a.services import HubServices
from persona_agent.a2a.task_store import SqlTaskStore
from persona_agent.api.deps import UPLOAD_HEADER, ApiAuth, HubReader, is_loopback
from persona_agent.api.pages import add_pages
from persona_agent.api.persona_data import DeletedPersonaData
from persona_agent.api.routes import personas as personas_routes
from persona_agent.api.routes.personas import ErrorDetail
from persona_agent.api.webhooks import build_push
from persona_agent.chat.budget import BudgetLimits
from persona_agent.chat.engine import ChatEngine
from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.tools import MCPTools, ToolSource, ToolSources
from persona_agent.chat.usage_log import UsageLog
from persona_agent.collab.consultation import Consultations
from persona_agent.collab.local_calls import LocalCalls
from persona_agent.collab.panel_executor import PanelExecutor
from persona_agent.collab.panel_prompts import warn_panel_problems
from persona_agent.db import GroupCommitWriter, create_engine
from persona_agent.errors import (
    ConfigError,
    PersonaAgentError,
    PersonaExistsError,
    PersonaNotFoundError,
    PreconditionFailedError,
)
from persona_agent.llm.base import LLMBackend
from persona_agent.llm.local.weights import LOCAL_MODEL_NAME
from persona_agent.migrations import prepare_db
from persona_agent.observe.metrics import CONTENT_TYPE_LATEST, HubMetrics
from persona_agent.observe.pricing import load_prices
from persona_agent.observe.tracing import start_tracing
from persona_agent.parts import (
    build_authenticator,
    build_llm_backend,
    open_persona_store,
    persona_limits,
    prepare_llm_backend,
    warn_unknown_agents,
    warn_unknown_tool_servers,
)
from persona_agent.personas.formats.card_pngs import CardPngs
from persona_agent.personas.model import Persona
from persona_agent.personas.panel_listing import panel_listing, with_panels
from persona_agent.personas.store import FilePersonaStore, PersonaStore
from persona_agent.personas.watcher import watch_personas
from persona_agent.retention import Retention, RetentionLimits
from persona_agent.security.audit import AuditLog
from persona_agent.security.body_limits import BodyLimit
from persona_agent.security.card_signing import JWKS_PATH, CardSigner
from persona_agent.security.host_guard import HostGuard
from persona_agent.security.quotas import QuotaLimits, Quotas
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.cluster import Cluster
    from persona_agent.cluster.notify import Listener
    from persona_agent.cluster.tasks import ClusterTaskStore
    from persona_agent.collab.agent_tools import RemoteAgents
    from persona_agent.mcp.toolbox import MCPToolbox
    from persona_agent.personas.sql_store import SqlPersonaStore

__all__ = ["create_app", "load_personas"]

logger = logging.getLogger(__name__)

PUSH_CHANNEL = "pa_push_configs"
"""Replicas: notified with a task id when a push config is set for it."""

UNFINISHED_REASON = "The server stopped before this task finished; send the message again."


def load_personas(settings: Settings) -> PersonaStore:
    """The settings' persona store, loaded; any bad file stops start-up with every problem
    named."""
    store = open_persona_store(settings)
    try:
        errors = store.load()
    except OSError as error:
        raise ConfigError(
            f"Persona directory {settings.personas_dir} cannot be read: {error}"
        ) from None
    if errors:
        raise ConfigError(
            f"{len(errors)} invalid persona file(s):\n" + "\n".join(f"  {e}" for e in errors)
        )
    return store


async def _import_personas(settings: Settings, store: SqlPersonaStore, listener: Listener) -> None:
    """Replicas: import the persona directory's files into the database (a file already
    imported, unchanged, is left alone), then load every persona and follow changes."""
    directory = settings.personas_dir
    if directory.is_dir():
        errors = await store.import_directory(directory)
        if errors:
            raise ConfigError(
                f"{len(errors)} invalid persona file(s):\n" + "\n".join(f"  {e}" for e in errors)
            )
    await store.start(listener)


async def _load_quietly(llm: LLMBackend) -> None:
    """Load the model backend for a readiness probe; a failure is logged (the probe keeps
    saying not ready, and the next one tries again)."""
    try:
        await llm.load()
    except Exception:
        logger.exception("Loading the model backend failed")


def create_app(settings: Settings) -> FastAPI:
    """The hub as an ASGI app. Start-up (its lifespan) opens the database and MCP servers."""
    tracer_provider = start_tracing(os.environ)  # off unless OTEL_* asks (docs/observability.md)
    metrics = HubMetrics() if settings.metrics else HubMetrics.disabled()
    toolbox: MCPToolbox | None = None
    if settings.mcp_config is not None:
        # Imported only when configured: the MCP SDK costs ~18 MB of memory.
        from persona_agent.mcp.config import load_mcp_config
        from persona_agent.mcp.toolbox import MCPToolbox

        mcp_config = load_mcp_config(settings.mcp_config, os.environ)
        toolbox = MCPToolbox(mcp_config, default_timeout=settings.tool_timeout, metrics=metrics)
    db = create_engine(
        settings.resolved_database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
    )
    # Every write of the hub, in shared transactions.
    writer = GroupCommitWriter(db, on_commit=metrics.db_commit_seconds.observe)
    # On PostgreSQL this process is a replica: any number of them on one database are one
    # hub (docs/deployment.md). Imported only then: the cluster parts need asyncpg.
    cluster: Cluster | None = None
    if db.dialect.name == "postgresql":
        from persona_agent.cluster import Cluster

        cluster = Cluster(
            writer,
            lease_seconds=settings.replica_lease_seconds,
            pool_size=settings.db_pool_size,
        )
        metrics.set_replica(cluster.replica)
    llm = build_llm_backend(settings)
    usage = UsageLog(writer)
    history = ConversationHistory(
        writer,
        cache_size=settings.history_cache_size,
        cache_bytes=settings.history_cache_bytes,
        max_messages=settings.history_max_messages,
        shared=cluster is not None,
    )
    remote_agents: RemoteAgents | None = None
    if settings.agents_file is not None:
        # Imported only when configured, as the MCP toolbox is.
        from persona_agent.collab.agent_tools import RemoteAgents
        from persona_agent.collab.agents_file import load_agents_config

        agents_config = load_agents_config(settings.agents_file, os.environ)
        remote_agents = RemoteAgents(agents_config, metrics=metrics)
    # What a model may call: other personas (the registry's, below), outside agents, then
    # MCP tools (last: the toolbox takes every name left).
    sources: list[ToolSource] = []
    if remote_agents is not None:
        sources.append(remote_agents)
    if toolbox is not None:
        sources.append(MCPTools(toolbox))
    tools = ToolSources(sources)
    engine = ChatEngine(
        llm,
        history,
        tools,
        max_tool_iterations=settings.max_tool_iterations,
        locks=cluster.locks if cluster is not None else None,
        prices=load_prices(settings.llm_prices, free=(LOCAL_MODEL_NAME,)),
        usage=usage,
        metrics=metrics,
    )
    lean_store = cluster.tasks.as_task_store if cluster is not None else SqlTaskStore(writer)
    task_store: SqlTaskStore | ClusterTaskStore = (
        cluster.tasks if cluster is not None else lean_store
    )
    persona_data = DeletedPersonaData(lean_store, history, usage)
    store: PersonaStore
    sql_store: SqlPersonaStore | None = None
    if cluster is not None:
        from persona_agent.personas.sql_store import SqlPersonaStore

        store = sql_store = SqlPersonaStore(db, limits=persona_limits(settings))
    else:
        store = load_personas(settings)
    authenticator = build_authenticator(settings)
    signer = (
        CardSigner.from_file(
            settings.card_signing_key, settings.card_signing_key_id, settings.base_url
        )
        if settings.card_signing_key is not None
        else None
    )
    audit = AuditLog(settings.audit_log)
    quotas = Quotas(
        QuotaLimits(
            requests_per_minute=settings.rate_limit,
            running_tasks=settings.max_running_tasks,
            open_streams=settings.max_streams,
            loopback_exempt=not settings.limit_loopback,
        )
    )
    push = (
        build_push(
            settings,
            db,
            announce=(
                functools.partial(cluster.announce, PUSH_CHANNEL) if cluster is not None else None
            ),
            metrics=metrics,
        )
        if settings.push_notifications
        else None
    )
    retention = Retention(
        writer,
        RetentionLimits(
            task_max_age_days=settings.retention_task_days,
            task_max_count=settings.retention_task_count,
            task_max_bytes=settings.retention_task_bytes,
            message_max_count=settings.retention_message_count,
            message_max_bytes=settings.retention_message_bytes,
        ),
        prune=[push.store.prune] if push is not None else [],
    )
    services = HubServices(
        authenticator=authenticator,
        quotas=quotas,
        audit=audit,
        signer=signer,
        push=push,
        avatars=store.avatar,
        stream_idle_seconds=settings.stream_idle_seconds,
        log_fields=settings.log_format == "json",
        provider=provider(
            settings.provider_organization, settings.provider_url or settings.base_url
        ),
        event_stream=cluster.events if cluster is not None else None,
        metrics=metrics,
        budget=BudgetLimits(
            model_calls=settings.request_budget_model_calls,
            tool_calls=settings.request_budget_tool_calls,
        ),
    )

    def panel_executor(persona: Persona) -> PanelExecutor:
        return PanelExecutor(
            persona,
            local_calls,
            registry.persona,
            audit=services.audit,
            quotas=services.quotas,
            metrics=services.metrics,
            budget=services.budget,
        )

    registry = A2ARegistry(
        engine=engine,
        task_store=task_store,
        base_url=settings.base_url,
        max_message_bytes=settings.max_message_bytes,
        shutdown_grace_period=settings.shutdown_grace_seconds,
        task_listing=settings.task_listing,
        max_id_length=settings.max_id_length,
        services=services,
        panel_executors=panel_executor,
    )
    # Messages to the hub's own personas from within it (consultations, panels).
    local_calls = LocalCalls(registry.local_handler)
    metrics.count_personas(lambda: len(registry))
    consultations = Consultations(
        local_calls,
        registry.persona,
        registry.personas,
        max_depth=settings.consult_depth,
    )
    tools.sources.insert(0, consultations)  # before MCP: it takes every other name

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await prepare_db(db, auto_upgrade=settings.db_auto_upgrade)
        if cluster is not None and sql_store is not None:
            if push is not None:
                await cluster.listener.listen(PUSH_CHANNEL, push.store.heard)
            await cluster.start(registry.canceled_elsewhere)
            await _import_personas(settings, sql_store, cluster.listener)
        else:
            marked = await lean_store.fail_unfinished(UNFINISHED_REASON)
            if marked:
                logger.warning("Marked %d unfinished task(s) from an earlier run as failed", marked)
        if toolbox is not None:
            await toolbox.start()
        if remote_agents is not None:
            await remote_agents.start()
        personas = await store.list()
        for persona in personas:
            registry.put(persona)
        warn_unknown_tool_servers(personas, list(toolbox.servers) if toolbox is not None else [])
        warn_unknown_agents(personas, remote_agents.names() if remote_agents is not None else [])
        warn_panel_problems(personas)
        await prepare_llm_backend(llm, personas, preload=settings.local_preload)
        app.state.personas_loaded = True
        unsubscribe = store.subscribe(registry.apply)
        unsubscribe_data = store.subscribe(persona_data.on_change)
        stop_watching = asyncio.Event()
        sweeping = asyncio.create_task(retention.run(stop_watching, settings.retention_interval))
        watcher = (
            asyncio.create_task(watch_personas(store, stop_watching))
            if settings.watch_personas and isinstance(store, FilePersonaStore)
            else None
        )
        _log_startup(settings, llm, registry)
        try:
            yield
        finally:
            stop_watching.set()
            if watcher is not None:
                await watcher
            await sweeping
            unsubscribe()
            unsubscribe_data()
            await persona_data.aclose()
            await registry.aclose()
            if cluster is not None and sql_store is not None:
                await cluster.aclose()  # its tasks are done: the lease goes
                await sql_store.aclose()
            await lean_store.aclose()
            await writer.aclose()
            if toolbox is not None:
                await toolbox.aclose()
            if remote_agents is not None:
                await remote_agents.aclose()
            await llm.aclose()
            if push is not None:
                await push.aclose()
            audit.close()
            await db.dispose()
            if tracer_provider is not None:  # the spans not yet sent go now
                await asyncio.to_thread(tracer_provider.shutdown)

    app = HubApp(
        title="persona-agent",
        version=__version__,
        description="A multi-persona A2A hub.",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc: add_pages, with files served by the hub
        redoc_url=None,
    )
    app.add_middleware(BodyLimit, limits=persona_limits(settings))
    app.state.settings = settings
    app.state.persona_limits = persona_limits(settings)
    app.state.card_pngs = CardPngs(settings.card_png_cache_bytes)
    app.state.api_auth = ApiAuth(
        authenticator,
        listen_host=settings.host,
        allowed_origins=settings.cors_origin_list,
        audit=audit,
    )
    app.state.audit = audit
    app.state.registry = registry
    app.state.persona_store = store
    app.state.persona_data = persona_data
    app.state.engine = engine
    app.state.usage = usage
    app.state.personas_loaded = False

    @app.get("/.well-known/agent.json", tags=["discovery"])
    async def aggregate_card() -> dict[str, Any]:
        """Every persona's agent card, with the hub's own card (its directory agent's)."""
        return {
            "hub": registry.directory.card_dict,
            "agents": [app_.card_dict for app_ in registry.apps()],
            "panels": [
                {"id": persona.id, **panel}
                for persona in registry.personas()
                if (panel := panel_listing(persona)) is not None
            ],
        }

    @app.get(CARD_PATH, tags=["discovery"])
    async def hub_card(request: Request) -> Response:
        """The hub's own card: its directory agent, at ``/a2a/``, which answers any message
        with the personas and their card URLs (docs/a2a.md#the-hubs-own-agent)."""
        directory = registry.directory
        return card_response(request, directory.card_dict, directory.card_etag)

    @app.get(f"{A2A_PREFIX}/personas", tags=["discovery"])
    async def list_personas() -> list[dict[str, Any]]:
        """Every persona served: id, name, description, endpoint and card URL; a panel's
        mode, members and moderator too (``panel``)."""
        return with_panels(registry.directory.entries(), registry.persona)

    @app.get(
        JWKS_PATH,
        tags=["discovery"],
        responses={404: {"model": ErrorDetail, "description": "Agent cards are not signed"}},
    )
    async def card_keys() -> JSONResponse:
        """The public key of the agent cards' signatures (404 when cards are not signed)."""
        if signer is None:
            return JSONResponse({"detail": "Agent cards are not signed"}, status_code=404)
        return JSONResponse(signer.jwks())

    @app.get("/healthz", tags=["operations"])
    async def healthz() -> JSONResponse:
        """The process serves (liveness)."""
        return JSONResponse({"status": "ok", "personas": len(registry)})

    loading: list[asyncio.Task[None]] = []

    @app.get("/readyz", tags=["operations"])
    async def readyz() -> JSONResponse:
        """Readiness: the database answers within two seconds, the personas are loaded, and
        the model backend can answer at once (the embedded model loaded: a probe starts
        loading it when start-up did not). 503, naming what is not ready in ``notReady``,
        so a load balancer sends requests elsewhere meanwhile."""
        not_ready: list[str] = []
        body: dict[str, Any] = {"personas": len(registry)}
        if cluster is not None:
            body["replica"] = cluster.replica
        try:
            async with asyncio.timeout(2):
                await writer.fetch(select(literal(1)))
            body["database"] = "ok"
        except Exception as error:
            logger.warning("Readiness check: the database does not answer (%s)", error)
            body["database"] = "unreachable"
            not_ready.append("database")
        if not app.state.personas_loaded:
            not_ready.append("personas")
        model: dict[str, Any] = {"backend": llm.name, "model": llm.default_model}
        if not llm.loaded:
            model["loaded"] = False
            not_ready.append("llm")
            if not loading or loading[0].done():  # load it now (once at a time)
                loading[:] = [asyncio.create_task(_load_quietly(llm))]
        body["llm"] = model
        if not_ready:
            return JSONResponse(
                {**body, "status": "unavailable", "notReady": not_ready}, status_code=503
            )
        return JSONResponse({**body, "status": "ready", "notReady": []})

    @app.get(
        "/metrics",
        tags=["operations"],
        dependencies=[HubReader],
        response_class=Response,
        responses={
            200: {
                "description": "The metrics, in Prometheus' text format",
                "content": {CONTENT_TYPE_LATEST.split(";")[0]: {}},
            },
            401: {"model": ErrorDetail, "description": "No credential, or a wrong one"},
            403: {
                "model": ErrorDetail,
                "description": "Not personas:read, or a key for some personas only",
            },
            404: {"model": ErrorDetail, "description": "Metrics are off"},
        },
    )
    async def prometheus_metrics() -> Response:
        """Prometheus metrics, in the text format (``personas:read`` for every persona when
        credentials are configured; 404 with ``PERSONA_AGENT_METRICS=false``)."""
        if not metrics.enabled:
            return JSONResponse(
                {"detail": "Metrics are off (PERSONA_AGENT_METRICS=false)"}, status_code=404
            )
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.include_router(personas_routes.router, prefix="/api/v1")
    add_pages(app, registry, console=settings.console)
    for error_type, code in (
        (PersonaNotFoundError, 404),
        (PersonaExistsError, 409),
        (PreconditionFailedError, 412),
    ):
        app.add_exception_handler(error_type, _status_handler(code))
    origins = settings.cors_origin_list
    a2a: ASGIApp = registry
    if origins:  # off by default: no browser page of another origin may call the hub
        app.add_middleware(CORSMiddleware, **cors_options(origins))
        a2a = CORSMiddleware(registry, **cors_options(origins))
    app.router.routes.append(Mount(A2A_PREFIX, app=a2a))
    app.registry = registry
    app.a2a = a2a
    app.guarded = HostGuard(
        app.serve,
        check_host=is_loopback(settings.host) and not authenticator.enabled,
        listen_host=settings.host,
        allowed_hosts=settings.allowed_host_list,
        own_origins=[settings.public_base_url or ""],
        cors_origins=origins,
        audit=audit,
        a2a_prefix=A2A_PREFIX,
    )
    return app


class HubApp(FastAPI):
    """The FastAPI app, with the A2A endpoints served by the registry directly.

    ``/a2a/{persona_id}/...`` skips FastAPI's middleware and router (a fifth of
    the hub's own CPU per A2A request); the registry is still mounted, so the
    routes are the same whichever way a request comes in.
    """

    registry: A2ARegistry | None = None
    a2a: ASGIApp | None = None
    """The registry, behind CORS when origins are allowed."""
    guarded: ASGIApp | None = None
    """:meth:`serve` behind the Host and Origin rules (:mod:`.host_guard`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await (self.guarded or self.serve)(scope, receive, send)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Every route: A2A straight to the registry, the rest through FastAPI."""
        a2a = self.a2a
        # Behind a proxy's root path, the mount takes it (it knows how to strip it).
        if a2a is not None and scope["type"] == "http" and not scope.get("root_path"):
            path: str = scope["path"]
            if path.startswith(_A2A_PATH) and path != _PERSONA_LIST_PATH:
                await a2a({**scope, "root_path": A2A_PREFIX}, receive, send)
                return
        await super().__call__(scope, receive, send)


_A2A_PATH = f"{A2A_PREFIX}/"
_PERSONA_LIST_PATH = f"{A2A_PREFIX}/personas"


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


def _log_startup(settings: Settings, llm: LLMBackend, registry: A2ARegistry) -> None:
    logger.info("Serving %d persona(s) at %s%s/{id}/", len(registry), settings.base_url, A2A_PREFIX)
    auth = registry.services.auth  # None when nobody can authenticate
    if auth is None:
        if not is_loopback(settings.host):
            logger.warning(
                "No API keys or OIDC issuer are configured and the hub listens on %s: every "
                "persona answers anyone over A2A, /api/v1 reads are open and every write is "
                "refused. Set PERSONA_AGENT_API_KEYS (docs/security.md).",
                settings.host,
            )
        else:
            logger.warning(
                "No API keys are configured: /api/v1 reads are open and writes are accepted "
                "only from this machine (loopback client and Host, no other origin). Set "
                "PERSONA_AGENT_API_KEYS to require a key."
            )
    else:
        logger.info(
            "A2A access: %s by default (a persona's access: overrides); /api/v1 needs credentials",
            auth.default_access,
        )
    if llm.name == "local":
        logger.info(
            "LLM backend: local, the embedded model %s (no key needed; set "
            "PERSONA_AGENT_LLM_BASE_URL to use an OpenAI-compatible server: docs/local-model.md)",
            llm.default_model,
        )
    else:
        logger.info("LLM backend: %s, model %s", llm.name, llm.default_model)
