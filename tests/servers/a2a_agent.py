"""A small, real A2A agent for the outside-agent tests: the a2a-sdk's own server pieces
(its request handler, in-memory task store, JSON-RPC and HTTP+JSON routes and card route
with its ETag) served by uvicorn in a thread on 127.0.0.1, with a scripted executor.

    with ScriptedAgent() as agent:
        agent.fail_next = 3       # the next 3 A2A calls are answered 503, then it recovers
        agent.hang = True         # the answer never comes (until the task is canceled)
        agent.question = "Which year?"   # a new task asks this first (input-required)

It answers ``Echo: {text}`` in two streamed artifact chunks; a task that asked a question
answers the next message with ``Thanks: {text}``. With :attr:`api_key` set, a call without
``X-API-Key: {api_key}`` is answered 401.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from a2a.helpers import get_message_text, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
)
from starlette.applications import Starlette
from starlette.types import Message, Receive, Scope, Send

from tests.servers.threaded import ServedInThread

__all__ = ["ScriptedAgent"]

CARD_PATH = "/.well-known/agent-card.json"


class ScriptedAgent(ServedInThread):
    """An A2A agent whose failures, slowness and questions the test sets (attributes are
    read by the server's thread at each request)."""

    label = "A2A agent"

    def __init__(
        self, name: str = "Scripted Agent", bindings: tuple[str, ...] = ("JSONRPC", "HTTP+JSON")
    ) -> None:
        self.name = name
        self.bindings = bindings
        self.fail_next = 0
        """A2A calls still to answer 503 (a transient failure) before the SDK sees them."""
        self.fail_status = 503
        self.hang = False
        self.question: str | None = None
        self.api_key: str | None = None
        self.calls = 0
        """A2A calls (POSTs) received, the failed ones included."""
        self.messages: list[str] = []
        """Texts of the messages that reached the executor."""
        self.canceled: list[str] = []
        self.received = threading.Event()
        """Set when a message reaches the executor (wait with ``asyncio.to_thread``)."""
        self.cancel_received = threading.Event()
        self.card_requests = 0
        self.card_not_modified = 0
        self.headers: list[dict[str, str]] = []
        """Each A2A call's headers, by lower-case name."""
        self.paths: list[str] = []
        """Each A2A call's path (``/`` for JSON-RPC, ``/message:stream``... for HTTP+JSON)."""
        self._lock = threading.Lock()
        self._asgi: Starlette | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def card_url(self) -> str:
        return self.url + CARD_PATH

    def card(self) -> AgentCard:
        return AgentCard(
            name=self.name,
            description="Repeats what it is told, for the tests.",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(url=f"{self.url}/", protocol_binding=binding, protocol_version="1.0")
                for binding in self.bindings
            ],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[
                AgentSkill(
                    id="echo",
                    name="Echo",
                    description="Says back what it was told",
                    tags=["echo"],
                )
            ],
        )

    def _build(self) -> Starlette:
        card = self.card()
        handler = DefaultRequestHandler(
            agent_executor=_Executor(self), task_store=InMemoryTaskStore(), agent_card=card
        )
        routes = [
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, rpc_url="/"),
            *create_rest_routes(handler),
        ]
        return Starlette(routes=routes)

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if self._asgi is None:
            self._asgi = self._build()
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"] == CARD_PATH:
            with self._lock:
                self.card_requests += 1
            await self._asgi(scope, receive, self._counting_304(send))
            return
        if scope["method"] == "POST":
            with self._lock:
                self.calls += 1
                self.headers.append(headers)
                self.paths.append(scope["path"])
                failing = self.fail_next > 0
                if failing:
                    self.fail_next -= 1
            if failing:
                await _plain(send, self.fail_status, "scripted failure")
                return
            if self.api_key is not None and headers.get("x-api-key") != self.api_key:
                await _plain(send, 401, "no or wrong API key")
                return
        await self._asgi(scope, receive, send)

    def _counting_304(self, send: Send) -> Send:
        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 304:
                with self._lock:
                    self.card_not_modified += 1
            await send(message)

        return counted


class _Executor(AgentExecutor):
    def __init__(self, agent: ScriptedAgent) -> None:
        self.agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        assert context.task_id
        assert context.context_id
        text = get_message_text(message)
        self.agent.messages.append(text)
        self.agent.received.set()
        first = context.current_task is None
        if first:
            await event_queue.enqueue_event(new_task_from_user_message(message))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if self.agent.hang:
            await asyncio.Event().wait()  # until the task is canceled
        if first and self.agent.question is not None:
            await updater.requires_input(
                updater.new_agent_message([Part(text=self.agent.question)])
            )
            return
        said = f"Echo: {text}" if first else f"Thanks: {text}"
        head, _, tail = said.partition(" ")
        await updater.add_artifact([Part(text=head + " ")], artifact_id="answer", name="answer")
        await updater.add_artifact(
            [Part(text=tail)], artifact_id="answer", append=True, last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id
        assert context.context_id
        self.agent.canceled.append(context.task_id)
        self.agent.cancel_received.set()
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers: list[Any] = [
        (b"content-type", b"text/plain"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
