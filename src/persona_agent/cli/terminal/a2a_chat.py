"""The terminal chat's A2A client: the agent's card, the conversation's context, each turn's
stream, and its cancel.

The chat is a plain A2A client (the official a2a-sdk client, over JSON-RPC or HTTP+JSON as
the card offers), so it talks to any A2A agent the same way; what a turn's events show is
printed by :mod:`persona_agent.cli.terminal.chat_answer`. What it knows of a persona-agent hub is
only where the hub serves a persona's card (``/a2a/{id}/``) and its list of personas
(``/a2a/personas``, for the error that names an unknown persona), and the greeting
extension on the card.

This module imports the SDK and httpx, so :mod:`persona_agent.cli.terminal.chat` imports it only
when the command runs: ``persona-agent --help`` need not wait for them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client import A2ACardResolver, AgentCardResolutionError, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError, TaskNotCancelableError

from persona_agent.a2a.cards import A2A_PREFIX, CARD_PATH, persona_url
from persona_agent.a2a.extensions import GREETING_EXTENSION_URI
from persona_agent.cli.terminal.chat_answer import AnswerPrinter

__all__ = [
    "CANCEL_WAIT",
    "DEMO_NOTE",
    "TIMEOUT",
    "ChatError",
    "ChatSession",
    "Sent",
    "Target",
    "greeting",
    "resolve_card",
]

BINDINGS = ["JSONRPC", "HTTP+JSON"]
"""What the chat speaks, in the order it prefers when the card leaves the choice."""
DEMO_NOTE = (
    "(answered by the hub's embedded demo model, Gemma 3 270M: small, and often wrong; "
    "docs/local-model.md says how to use a real one)"
)
"""Said once a chat, after the first answer of the embedded demo model."""
TIMEOUT = httpx.Timeout(30.0, read=600.0)
"""A read may wait long: a small model on a CPU can think for minutes before its first
token, and Ctrl-C cancels any answer."""
CANCEL_WAIT = 10.0
"""How long a cancel waits for the agent to name the running answer's task."""


class ChatError(Exception):
    """A problem to tell the user in one line; the chat goes on, or exits before it began."""


@dataclass(frozen=True)
class Target:
    """Where the agent's card is, and, for a persona of a hub, the hub and the persona.

    ``key`` names the target in the remembered contexts: the hub's URL (or ``hub_key``:
    the hub started in this process, whose port changes every run) with the persona's
    id, or the agent's card URL.
    """

    card_url: str
    hub_url: str | None = None
    persona_id: str | None = None
    hub_key: str | None = None
    card: AgentCard | None = field(default=None, compare=False)  # as an AI Catalog carries it

    @classmethod
    def hub_persona(cls, hub_url: str, persona_id: str, hub_key: str | None = None) -> Target:
        base = hub_url.rstrip("/")
        card = persona_url(base, persona_id).rstrip("/") + CARD_PATH
        return cls(card, base, persona_id, hub_key)

    @classmethod
    def agent(cls, url: str) -> Target:
        """Any A2A agent: ``url`` is its card when its path ends in ``.json``, else the
        agent's base URL, whose card is at ``{url}/.well-known/agent-card.json``."""
        if urlsplit(url).path.endswith(".json"):
            return cls(url)
        return cls(url.rstrip("/") + CARD_PATH)

    def switched(self, persona_id: str) -> Target:
        """Another persona of the same hub."""
        if self.hub_url is None:
            raise ChatError("/persona needs a persona-agent hub: this chat is with one agent")
        return Target.hub_persona(self.hub_url, persona_id, self.hub_key)

    @property
    def key(self) -> tuple[str, str]:
        if self.hub_url is None or self.persona_id is None:
            return self.card_url, ""
        return self.hub_key or self.hub_url, self.persona_id


async def resolve_card(http: httpx.AsyncClient, target: Target) -> AgentCard:
    """The target's agent card; a :class:`ChatError` that says what is wrong otherwise
    (a hub's unknown persona is named, with the personas the hub has)."""
    if target.card is not None:
        return target.card
    resolver = A2ACardResolver(http, target.card_url, agent_card_path="")
    where = target.hub_url or target.card_url
    try:
        return await resolver.get_agent_card()
    except AgentCardResolutionError as error:
        if isinstance(error.__cause__, httpx.RequestError):
            what = "hub" if target.hub_url else "agent"
            raise ChatError(f"Cannot reach the {what} at {where}: {error.__cause__}") from error
        if error.status_code == 404 and target.hub_url is not None:
            raise ChatError(await _unknown_persona(http, target)) from error
        raise ChatError(f"No agent card at {target.card_url}: {error.message}") from error


async def _unknown_persona(http: httpx.AsyncClient, target: Target) -> str:
    told = f"No persona '{target.persona_id}' on the hub at {target.hub_url}"
    try:
        response = await http.get(f"{target.hub_url}{A2A_PREFIX}/personas")
        response.raise_for_status()
        ids = sorted(str(item["id"]) for item in response.json())
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return f"{told} (and its list of personas, {A2A_PREFIX}/personas, did not answer)"
    return f"{told}. Its personas: {', '.join(ids) or 'none'}"


def greeting(card: AgentCard) -> str | None:
    """The greeting the card's greeting extension declares, if any."""
    for extension in card.capabilities.extensions:
        if extension.uri == GREETING_EXTENSION_URI and "greeting" in extension.params.fields:
            text = extension.params.fields["greeting"].string_value
            return text or None
    return None


@dataclass(frozen=True)
class Sent:
    """What a turn left besides what it printed: its task, and its voice's audio parts."""

    task_id: str = ""
    audio: list[Part] = field(default_factory=list)
    refused: bool = False
    """The message was refused, or its answer failed before a word of it: what the user
    wrote is to be offered back, not lost."""


class ChatSession:
    """The agent being talked to, its client and the conversation (A2A context) under way.

    Its coroutines run on one event loop; :meth:`cancel` runs while :meth:`send` streams,
    and asks the agent to cancel the task that turn started (CancelTask), after which the
    agent ends that stream with ``canceled``. ``on_context`` is told each new context id
    the agent gives, for the chat to continue it next time.
    """

    def __init__(self, http: httpx.AsyncClient, on_context: Callable[[Target, str], None]) -> None:
        self._http = http
        self._on_context = on_context
        self._factory = ClientFactory(
            ClientConfig(streaming=True, httpx_client=http, supported_protocol_bindings=BINDINGS)
        )
        self._client: Client | None = None
        self._target: Target | None = None
        self.card = AgentCard()
        self.context_id: str | None = None
        self._input_task: str | None = None  # a task waiting for the user's input
        self._task_id: str | None = None
        self._task_named = asyncio.Event()
        self._answer: AnswerPrinter | None = None  # the one being printed
        self._demo_noted = False  # said once that the demo model answers

    async def connect(self, target: Target) -> None:
        """Talk to ``target`` from now on; on a :class:`ChatError`, the agent so far stays."""
        card = await resolve_card(self._http, target)
        try:
            client = self._factory.create(card)
        except ValueError as error:
            raise ChatError(
                f"The agent at {target.card_url} offers neither JSON-RPC nor HTTP+JSON: {error}"
            ) from error
        if self._client is not None:
            await self._client.close()
        self._client, self._target, self.card = client, target, card
        self.context_id = self._input_task = None

    @property
    def target(self) -> Target:
        """The agent talked to; once :meth:`connect` succeeded."""
        if self._target is None:
            raise ChatError("not connected to an agent")
        return self._target

    @property
    def name(self) -> str:
        return self.card.name or "agent"

    def use_context(self, context_id: str | None) -> None:
        """Continue this conversation, or (``None``) start a new one with the next message."""
        self.context_id = context_id
        self._input_task = None

    async def send(
        self,
        text: str,
        metadata: dict[str, Any] | None = None,
        files: list[Part] | None = None,
        accepted: tuple[str, ...] = (),
    ) -> Sent:
        """One turn: send ``text`` in the conversation and print the answer as it streams;
        ``metadata``: the message's (an extension's value, say); ``files``: file parts sent
        after the text; ``accepted``: the output modes asked for (``audio/wav``: voice)."""
        if self._client is None:
            raise ChatError("not connected to an agent")
        parts = [Part(text=text)] if text else []
        message = Message(
            role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[*parts, *(files or [])]
        )
        if metadata:
            message.metadata.update(metadata)
        if self.context_id:
            message.context_id = self.context_id
        if self._input_task:
            message.task_id = self._input_task
        self._task_id, self._task_named = None, asyncio.Event()
        answer = self._answer = AnswerPrinter(self.name)
        answer.waiting.start()  # at once: the message is on its way
        task_id = None
        request = SendMessageRequest(
            message=message,
            configuration=SendMessageConfiguration(accepted_output_modes=accepted)
            if accepted
            else None,
        )
        try:
            async for event in self._client.send_message(request):
                self._note_ids(event)
                task_id = self._task_id
                answer.show(event)
        except (A2AError, httpx.HTTPError) as error:
            answer.aside(self._failure(error), fg="red")
            return Sent(task_id or "", answer.audio, refused=True)
        finally:
            answer.waiting.clear()
            self._task_id = self._answer = None  # nothing left to cancel
            self._task_named.set()
        answer.finish()
        if answer.demo_model and not self._demo_noted:
            self._demo_noted = True
            answer.aside(DEMO_NOTE, fg=None, dim=True)
        # An agent that asks for more input expects the answer in the same task.
        waiting = answer.state == TaskState.TASK_STATE_INPUT_REQUIRED
        self._input_task = task_id if waiting else None
        failed = answer.state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED)
        return Sent(task_id or "", answer.audio, refused=failed and not answer.text_shown)

    def _failure(self, error: A2AError | httpx.HTTPError) -> str:
        unreachable = error if isinstance(error, httpx.RequestError) else error.__cause__
        if isinstance(unreachable, httpx.RequestError):
            what = "hub" if self.target.hub_url else "agent"
            where = self.target.hub_url or self.target.card_url
            return f"Cannot reach the {what} at {where}: {unreachable}"
        return f"The agent answered with an error: {_reason(error)}"

    def _note_ids(self, event: StreamResponse) -> None:
        source: Task | Message | None = None
        if event.HasField("task"):
            source = event.task
        elif event.HasField("message"):
            source = event.message
        task_id = source.id if isinstance(source, Task) else ""
        context_id = source.context_id if source is not None else ""
        for update in (event.status_update, event.artifact_update):
            if update.task_id:
                task_id, context_id = update.task_id, update.context_id
        if task_id and self._task_id is None:
            self._task_id = task_id
            self._task_named.set()
        if context_id and context_id != self.context_id:
            self.context_id = context_id
            self._on_context(self.target, context_id)

    async def cancel(self) -> None:
        """Ask the agent to cancel the answer :meth:`send` is streaming (CancelTask).

        Waits a moment for the agent to name the answer's task if it has not yet. Nothing
        to do once the answer ended; a :class:`ChatError` if the agent refused.
        """
        if self._answer is not None:  # printed here, where the answer's line is known
            self._answer.at_line_start = False  # the terminal wrote ^C after the prompt
            self._answer.aside("(canceling the answer...)", fg=None, dim=True)
        try:
            async with asyncio.timeout(CANCEL_WAIT):
                await self._task_named.wait()
        except TimeoutError:
            raise ChatError("the agent did not say which task the answer is") from None
        task_id = self._task_id
        if task_id is None or self._client is None:
            return
        try:
            await self._client.cancel_task(CancelTaskRequest(id=task_id))
        except TaskNotCancelableError:
            return  # it ended meanwhile
        except A2AError as error:
            raise ChatError(f"The agent did not cancel the answer: {_reason(error)}") from error

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _reason(error: A2AError | httpx.HTTPError) -> str:
    message = error.message if isinstance(error, A2AError) else str(error)
    return message or type(error).__name__
