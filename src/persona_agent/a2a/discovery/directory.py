"""The hub's own A2A agent: a directory that tells a caller where the personas are.

A client pointed at the hub itself (``create_from_url("http://hub")``) finds the hub's
card at ``/.well-known/agent-card.json``: the card of this agent, served at
``{base}/a2a/`` (JSON-RPC) and below it (HTTP+JSON), protocol 1.0 and 0.3. Any message
it gets is answered at once with a message (no task, no model): each persona's id, name,
description and card URL, as text and as a data part. It keeps no tasks, so GetTask,
CancelTask and SubscribeToTask are TaskNotFound, ListTasks is UnsupportedOperation and
push configurations are PushNotificationNotSupported: the SDK's request handler answers
them all, as for a persona.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import cached_property
from typing import Any, NamedTuple

from a2a.helpers import new_data_part, new_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import AgentCard, ListTasksRequest, ListTasksResponse, Message
from a2a.utils.errors import TaskNotCancelableError, UnsupportedOperationError

from persona_agent.a2a.cards import A2A_PREFIX, CARD_PATH, build_hub_card, persona_url
from persona_agent.a2a.context_keys import PRINCIPAL_STATE_KEY
from persona_agent.a2a.services import HubServices
from persona_agent.personas.model import Persona
from persona_agent.security.principal import Principal

__all__ = ["DIRECTORY_DATA_KIND", "HubDirectory", "persona_entry"]

DIRECTORY_DATA_KIND = "persona-directory"
"""``kind`` of the data part of the directory's answer."""


def persona_entry(persona: Persona, base_url: str) -> dict[str, str]:
    """A persona as ``GET /a2a/personas`` and the directory list it: id, name,
    description, endpoint and card URL."""
    url = persona_url(base_url, persona.id)
    return {
        "id": persona.id,
        "name": persona.name,
        "description": persona.description,
        "url": url,
        "cardUrl": url.rstrip("/") + CARD_PATH,
    }


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _BuiltCard(NamedTuple):
    key: tuple[object, ...]
    """Each persona's id and version when it was built, and the gRPC address."""
    card: AgentCard
    as_dict: dict[str, Any]
    etag: str


class HubDirectory:
    """The directory agent: its card (always naming the personas served now), its SDK
    request handler, and its answer.

    ``personas``: the personas served, sorted by id (``A2ARegistry.personas``); asked
    again for every card and answer, so a persona added or removed shows at once.
    """

    def __init__(
        self,
        personas: Callable[[], list[Persona]],
        base_url: str,
        services: HubServices | None = None,
    ) -> None:
        self._personas = personas
        self.base_url = base_url
        self._services = services or HubServices()
        self._built: _BuiltCard | None = None
        self.grpc_address: str | None = None
        """The hub's gRPC server (``host:port``), where the directory is the tenant
        ``_directory``; set by ``A2ARegistry.serve_grpc`` once the server listens."""

    def _card_parts(self) -> _BuiltCard:
        """The card, as protobuf and as JSON, and its ETag; built again only when a persona
        has come, gone or changed (its ``version`` is a hash of its content)."""
        personas = self._personas()
        key: tuple[object, ...] = (
            *((persona.id, persona.version) for persona in personas),
            self.grpc_address,
        )
        built = self._built
        if built is not None and built.key == key:
            return built
        services = self._services
        card = build_hub_card(
            personas,
            self.base_url,
            services.provider,
            auth=services.auth,
            grpc_address=self.grpc_address,
        )
        if services.signer is not None:
            services.signer.sign(card)
        as_dict = agent_card_to_dict(card)
        body = json.dumps(as_dict, sort_keys=True, separators=(",", ":"))
        etag = f'W/"{hashlib.sha256(body.encode()).hexdigest()[:32]}"'
        self._built = _BuiltCard(key, card, as_dict, etag)
        return self._built

    @property
    def card(self) -> AgentCard:
        return self._card_parts().card

    @property
    def card_dict(self) -> dict[str, Any]:
        return self._card_parts().as_dict

    @property
    def card_etag(self) -> str:
        return self._card_parts().etag

    def entries(self, principal: Principal | None = None) -> list[dict[str, str]]:
        """Every persona served, as :func:`persona_entry` gives it; with ``principal``,
        those its key lets it use."""
        personas = self._personas()
        if principal is not None:
            shown = set(self._services.authorization.visible(principal, [p.id for p in personas]))
            personas = [persona for persona in personas if persona.id in shown]
        return [persona_entry(persona, self.base_url) for persona in personas]

    def answer(self, context_id: str | None = None, principal: Principal | None = None) -> Message:
        """The directory's answer to any message: the personas (those ``principal`` may
        use) as text lines and as a data part ``{"kind": "persona-directory", "personas":
        [...], "personasUrl": ...}``."""
        entries = self.entries(principal)
        listing = f"{self.base_url}{A2A_PREFIX}/personas"
        if entries:
            lines = [
                f"This hub serves {len(entries)} persona(s), each an A2A agent of its own. "
                "This directory does not answer as them: to talk with one, use its agent "
                "card (for example, create an A2A client from the card's URL).",
                "",
            ]
            lines += [
                f"- {entry['name']} ({entry['id']}): {_one_line(entry['description'])} "
                f"Card: {entry['cardUrl']}"
                for entry in entries
            ]
            lines += ["", f"The same list as JSON: {listing}"]
        else:
            lines = [
                "This hub serves no personas yet: add one with the REST API "
                f"({self.base_url}/api/v1/personas) or a file in its persona directory."
            ]
        data = {"kind": DIRECTORY_DATA_KIND, "personas": entries, "personasUrl": listing}
        return new_message(
            [new_text_part("\n".join(lines)), new_data_part(data)], context_id=context_id
        )

    @cached_property
    def handler(self) -> DefaultRequestHandler:
        """The SDK's request handler, on an executor that answers with :meth:`answer`."""
        return _DirectoryHandler(
            agent_executor=_DirectoryExecutor(self),
            task_store=InMemoryTaskStore(),  # stays empty: no answer is a task
            agent_card=self.card,  # for its capabilities, which never change
        )

    async def aclose(self) -> None:
        if "handler" in self.__dict__:
            await self.handler.aclose()


class _DirectoryExecutor(AgentExecutor):
    """Answers every message with one agent message, the directory (message-only)."""

    def __init__(self, directory: HubDirectory) -> None:
        self._directory = directory

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        principal = context.call_context.state.get(PRINCIPAL_STATE_KEY)
        answer = self._directory.answer(
            context.context_id, principal if isinstance(principal, Principal) else None
        )
        await event_queue.enqueue_event(answer)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise TaskNotCancelableError(message="The directory's answers are not tasks")


class _DirectoryHandler(DefaultRequestHandler):
    """The SDK's handler; ListTasks is unsupported (the directory keeps no tasks), rather
    than an empty list that suggests it might."""

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(
            message="The hub's directory keeps no tasks: each persona lists its own, at "
            f"its endpoint ({A2A_PREFIX}/{{persona_id}}/)"
        )
