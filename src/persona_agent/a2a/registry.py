"""A2ARegistry: persona id -> PersonaApp, the live set of personas served over A2A.

Adding, replacing or removing a persona swaps one dict entry: a request already
under way keeps the PersonaApp it started on. The ASGI side is the router
(:mod:`persona_agent.a2a.router`), which looks apps up here.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.cluster import StoredTask, VersionedTaskStore
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import AgentCard, CancelTaskRequest
from starlette.types import Receive, Scope, Send

from persona_agent.a2a.cards import build_agent_card, build_extended_card
from persona_agent.a2a.context_keys import TERMINAL_STATES
from persona_agent.a2a.discovery.ai_catalog import HubCatalog
from persona_agent.a2a.discovery.directory import HubDirectory
from persona_agent.a2a.forwarding import MAX_ID_LENGTH, PersonaRequestHandler, TaskListing
from persona_agent.a2a.router import A2ARouter
from persona_agent.a2a.sdk_fixes.validation import LeanValidationHandler
from persona_agent.a2a.services import HubServices
from persona_agent.a2a.tasks.executor import PersonaAgentExecutor
from persona_agent.a2a.tasks.lifecycle import TaskExecutor
from persona_agent.a2a.tasks.task_store import NewTaskIds, SqlTaskStore
from persona_agent.chat.engine import ChatEngine
from persona_agent.personas.model import Persona
from persona_agent.personas.stores.store import PersonaChange
from persona_agent.security.authorization import Action
from persona_agent.security.principal import Principal

__all__ = ["A2ARegistry", "PanelExecutors", "PersonaApp", "TaskExecutor"]

logger = logging.getLogger(__name__)


PanelExecutors = Callable[[Persona], TaskExecutor]
"""Builds a panel's executor (the collaboration package's, given by ``create_app``: the
protocol edge does not know how panels meet)."""


class PersonaApp:
    """Everything that serves one persona over A2A.

    The card and the SDK handler are built on first use, so that start-up with
    thousands of personas costs little time and memory for those never called.
    """

    def __init__(
        self,
        persona: Persona,
        base_url: str,
        engine: ChatEngine,
        task_store: TaskStore | VersionedTaskStore,
        services: HubServices | None = None,
        *,
        executor: TaskExecutor | None = None,
        lookup: Callable[[str], Persona | None] | None = None,
        grpc_address: str | None = None,
    ) -> None:
        """``executor``: what answers its tasks (default: the persona's chat executor; a
        panel's is given); ``lookup``: the hub's personas, for a panel's members' names;
        ``grpc_address``: the hub's gRPC server, on the card (None: off)."""
        self.persona = persona
        self._services = services = services or HubServices()
        self.executor: TaskExecutor = executor or PersonaAgentExecutor(
            persona,
            engine,
            audit=services.audit,
            quotas=services.quotas,
            metrics=services.metrics,
            budget=services.budget,
            documents=services.documents,
            tasks=task_store,
            images=services.images,
            speech=services.speech,
        )
        self.sees_images = services.vision.sees(persona)
        """Whether the persona's model is shown images (image parts are refused else)."""
        self._base_url = base_url
        self._task_store = task_store
        self._engine = engine
        self._lookup = lookup
        self.grpc_address = grpc_address

    @cached_property
    def card(self) -> AgentCard:
        services = self._services
        card = build_agent_card(
            self.persona,
            self._base_url,
            services.authenticator,
            push=services.push is not None,
            provided_by=services.provider,
            member_names=self._member_names(),
            images=self.sees_images,
            speaks=self._speaks(),
            grpc_address=self.grpc_address,
        )
        return services.signer.sign(card) if services.signer is not None else card

    def _speaks(self) -> bool:
        """Whether the persona's answers can be spoken: a persona (not a panel) with a
        voice installed (docs/media.md#voice)."""
        speech = self._services.speech
        if self.persona.panel is not None or not isinstance(self.executor, PersonaAgentExecutor):
            return False
        return speech.voice(self.persona.voice) is not None

    def _member_names(self) -> dict[str, str]:
        """A panel's members and moderator served now, by id, with their names."""
        panel, lookup = self.persona.panel, self._lookup
        if panel is None or lookup is None:
            return {}
        moderator = [panel.moderator] if panel.moderator is not None else []
        found = (lookup(i) for i in (*panel.members, *moderator))
        return {p.id: p.name for p in found if p is not None}

    @cached_property
    def extended_card(self) -> AgentCard | None:
        """For authenticated callers, when anyone can authenticate."""
        if self._services.auth is None:
            return None
        sources = self._engine.tools
        panel = self.persona.panel is not None  # its members' tools are theirs
        tools = sources.specs(self.persona) if sources is not None and not panel else []
        extended = build_extended_card(self.card, tools)
        signer = self._services.signer
        if signer is not None:  # its own signature: the public card's would not verify
            del extended.signatures[:]
            signer.sign(extended)
        return extended

    @property
    def output_modes(self) -> Sequence[str]:
        """The media types the persona answers in (its card's default output modes)."""
        return self.card.default_output_modes

    @cached_property
    def card_dict(self) -> dict[str, Any]:
        return agent_card_to_dict(self.card)

    @cached_property
    def card_etag(self) -> str:
        body = json.dumps(self.card_dict, sort_keys=True, separators=(",", ":"))
        return f'W/"{hashlib.sha256(body.encode()).hexdigest()[:32]}"'

    @cached_property
    def handler(self) -> DefaultRequestHandler:
        push = self._services.push
        store = self._task_store
        # New task ids told to the hub's store, which then needs no read for them.
        ids = NewTaskIds(store) if isinstance(store, SqlTaskStore) else None
        return LeanValidationHandler(
            agent_executor=self.executor,
            task_store=self._task_store,
            agent_card=self.card,
            extended_agent_card=self.extended_card,
            validate_input_modes=True,
            push_config_store=push.store if push is not None else None,
            push_sender=push.sender if push is not None else None,
            push_url_validator=push.guard.validate if push is not None else None,
            event_stream=self._services.event_stream,
            request_context_builder=SimpleRequestContextBuilder(task_id_generator=ids),
        )

    @property
    def started(self) -> bool:
        """Whether the SDK handler exists (a request has reached this persona)."""
        return "handler" in self.__dict__


class A2ARegistry:
    """The live set of personas served over A2A."""

    def __init__(
        self,
        *,
        engine: ChatEngine,
        task_store: TaskStore | VersionedTaskStore,
        base_url: str,
        max_message_bytes: int = 1024 * 1024,
        shutdown_grace_period: float = 0,
        task_listing: TaskListing = "context",
        max_id_length: int = MAX_ID_LENGTH,
        services: HubServices | None = None,
        panel_executors: PanelExecutors | None = None,
    ) -> None:
        """``task_listing``, ``max_id_length``: see :class:`PersonaRequestHandler`;
        ``services``: authentication, limits, audit, push notifications, avatars, card
        signatures (none: a hub that serves everyone, as it ships); ``panel_executors``:
        how a panel answers (none: a persona with ``panel:`` is refused)."""
        self._engine = engine
        self._panel_executors = panel_executors
        self.shutdown_grace_period = shutdown_grace_period
        self._task_store = task_store
        self.base_url = base_url
        self.services = services or HubServices()
        self._apps: dict[str, PersonaApp] = {}
        self._retired: dict[str, list[PersonaApp]] = {}
        """Replaced apps whose tasks still run: cancel and subscribe must reach them."""
        self.directory = HubDirectory(self.personas, base_url, self.services)
        """The hub's own agent, at ``/a2a/`` itself: where the personas are."""
        self.catalog = HubCatalog(self.apps, self.directory, self.services)
        """The AI Catalog of the agents served (``/.well-known/ai-catalog.json``)."""
        self.router = A2ARouter(
            self.app_for,
            max_message_bytes=max_message_bytes,
            shutdown_grace_period=shutdown_grace_period,
            task_listing=task_listing,
            max_id_length=max_id_length,
            services=self.services,
            directory=self.directory,
        )
        """The ASGI side: what ``/a2a`` is mounted on."""
        self.local_handler = PersonaRequestHandler(
            self.app_for,
            task_listing=task_listing,
            max_id_length=max_id_length,
            metrics=self.services.metrics,
            authorization=self.services.authorization,
            parts=self.services.parts,
        )
        """For messages to the served personas from within the hub (consultations,
        panels): the same forwarding handler as the router's, and the same checks."""
        self.grpc_address: str | None = None
        """The hub's gRPC server (``host:port``) every card lists, once it listens."""

    def serve_grpc(self, address: str | None) -> None:
        """List the gRPC server at ``address`` (None: none) on every card from now on.

        Called when the server listens (its port may be a free one). The cards of personas
        not yet called are rebuilt; a persona already serving keeps its handler (and the
        card it was made with) until it is replaced."""
        self.grpc_address = address
        self.directory.grpc_address = address
        for app in self._apps.values():
            app.grpc_address = address
            if not app.started:
                for cached in ("card", "card_dict", "card_etag", "extended_card"):
                    app.__dict__.pop(cached, None)

    # -- the registry -------------------------------------------------------

    def __len__(self) -> int:
        return len(self._apps)

    def __contains__(self, persona_id: object) -> bool:
        return persona_id in self._apps

    def get(self, persona_id: str) -> PersonaApp | None:
        return self._apps.get(persona_id)

    def persona(self, persona_id: str) -> Persona | None:
        """The persona served under ``persona_id``, if any."""
        app = self._apps.get(persona_id)
        return app.persona if app is not None else None

    def personas(self) -> list[Persona]:
        return [app.persona for app in sorted(self._apps.values(), key=lambda a: a.persona.id)]

    def callable_by(self, principal: Principal | None) -> list[Persona]:
        """The personas (panels too) ``principal`` may call, by id, as the hub's one
        authorization decides: what the MCP door lists as tools and the OpenAI-compatible
        door as models."""
        authorization = self.services.authorization
        return [
            persona
            for persona in self.personas()
            if authorization.refusal(principal, Action.CALL, persona.id, access=persona.access)
            is None
        ]

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
        executor: TaskExecutor | None = None
        if persona.panel is not None:
            if self._panel_executors is None:
                raise ValueError(f"the panel {persona.id} cannot be served: no panels here")
            executor = self._panel_executors(persona)
        return PersonaApp(
            persona,
            self.base_url,
            self._engine,
            self._task_store,
            self.services,
            executor=executor,
            lookup=self.persona,
            grpc_address=self.grpc_address,
        )

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
            *(app.handler.aclose() for app in apps if app.started),
            self.directory.aclose(),
            return_exceptions=True,
        )

    async def _is_terminal(self, task_id: str, call_context: ServerCallContext) -> bool:
        found = await self._task_store.get(task_id, call_context)
        task = found.task if isinstance(found, StoredTask) else found
        return task is not None and task.status.state in TERMINAL_STATES

    async def canceled_elsewhere(self, task_id: str) -> None:
        """Another replica canceled a task: if it runs here, stop it (see
        :meth:`PersonaAgentExecutor.canceled_elsewhere`)."""
        apps = [*self._apps.values(), *(a for old in self._retired.values() for a in old)]
        for app in apps:
            if task_id in app.executor.running:
                await app.executor.canceled_elsewhere(task_id)
                return

    async def _wait_terminal(self, task_id: str, call_context: ServerCallContext) -> None:
        """Poll the store until the task is terminal: its final state is durable then."""
        while True:
            if await self._is_terminal(task_id, call_context):
                return
            await asyncio.sleep(0.05)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve ``{persona_id}/...`` below the mount point (see :class:`A2ARouter`)."""
        await self.router(scope, receive, send)
