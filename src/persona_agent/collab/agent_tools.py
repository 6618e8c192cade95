"""Agents outside the hub as tools: an ``agent__{name}`` tool per agent a persona may call.

The agents are listed in the agents file (:mod:`persona_agent.collab.agents_file`); a persona
names those it may call (``agents: [names]``). The model sees one tool per agent, described
by the agent's card, with one argument, ``message``. A call sends the message with the
a2a-sdk client over the binding the card prefers, streams the answer back as the tool's
progress, and returns it to the model. The hub protects itself: a timeout per attempt,
retries with backoff on transient failures, and a circuit breaker per agent
(:mod:`persona_agent.collab.breaker`); a call that fails gives the model a tool error, and the
persona still answers. An agent asking for input (``input-required``) has its question
relayed to the user, and the user's answer is sent back to the agent's task
(:class:`~persona_agent.chat.tools.ToolQuestion`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

from persona_agent.a2a.discovery.catalog_reader import DEFAULT_CATALOG_LIMITS, CatalogLimits
from persona_agent.chat.tools import ToolProgress, ToolQuestion, ToolResult, ToolUpdate, Turn
from persona_agent.collab.agent_catalogs import AgentCatalogs, read_cards
from persona_agent.collab.agent_client import AGENT_PREFIX, RemoteAgent
from persona_agent.collab.agent_exchange import Exchange, Failure
from persona_agent.collab.agent_reach import AgentReach
from persona_agent.collab.agents_file import AgentConfig, AgentsConfig
from persona_agent.collab.breaker import BreakerOpenError
from persona_agent.errors import ToolError
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.personas.model import Persona

__all__ = ["AGENT_PREFIX", "RemoteAgents", "agent_tool_name"]

logger = logging.getLogger(__name__)

REMEMBERED = 4096
"""Remote conversations (and questions waiting for an answer) remembered at most."""
BREAKER_STATES = {"closed": 0, "half-open": 1, "open": 2}
"""The value of ``persona_agent_remote_agent_breaker_state`` for each state."""


def agent_tool_name(name: str) -> str:
    """``agent__{name}`` (an agent's name is at most 57 characters: it fits 64)."""
    return AGENT_PREFIX + name


@dataclass(frozen=True, slots=True)
class _RemoteTask:
    """A remote task waiting for the user's answer."""

    task_id: str
    context_id: str


class RemoteAgents:
    """The ``agent__*`` tools, as a :class:`~persona_agent.chat.tools.ToolSource`.

    ``clock`` and ``sleep`` are for the card's age, the breaker and the backoff (tests
    pass their own); ``metrics`` counts calls, retries and breaker states.
    """

    def __init__(
        self,
        config: AgentsConfig,
        *,
        metrics: HubMetrics = NO_METRICS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        catalog_limits: CatalogLimits = DEFAULT_CATALOG_LIMITS,
        allowed_hosts: Iterable[str] = (),
    ) -> None:
        self.metrics = metrics
        self._sleep = sleep
        self._clock = clock
        allowed = tuple(allowed_hosts)
        self.agents = {
            name: RemoteAgent(
                name,
                agent,
                clock=clock,
                on_breaker_change=self._breaker_changed,
                reach=AgentReach.of_agent(agent, allowed),
            )
            for name, agent in config.agents.items()
        }
        self.catalogs = AgentCatalogs(
            config.catalogs, self._add, clock=clock, limits=catalog_limits, allowed_hosts=allowed
        )
        """The agents file's catalogs, which add their agents to :attr:`agents`."""
        self._contexts: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        self._waiting: OrderedDict[tuple[str, str], _RemoteTask] = OrderedDict()
        for name in self.agents:
            metrics.remote_breaker.labels(name).set(0)

    def names(self) -> list[str]:
        """The configured agents' names (a catalog's, once it has been read)."""
        return list(self.agents)

    def _add(
        self, name: str, config: AgentConfig, card: dict[str, Any] | None, reach: AgentReach
    ) -> RemoteAgent | None:
        """An agent a catalog brings in (``None``: the name is taken)."""
        if name in self.agents:
            return None
        agent = self.agents[name] = RemoteAgent(
            name,
            config,
            clock=self._clock,
            on_breaker_change=self._breaker_changed,
            card=card,
            reach=reach,
        )
        self.metrics.remote_breaker.labels(name).set(0)
        return agent

    async def start(self) -> None:
        """Read every card (in parallel, each within its timeout); an agent whose card
        cannot be read is logged, still offered, and read again when called. The catalogs
        are read in the background (:meth:`AgentCatalogs.start`)."""
        self.catalogs.start()
        agents = list(self.agents.values())
        await read_cards(agents, max(len(agents), 1))  # the configured ones all at once

    async def aclose(self) -> None:
        await self.catalogs.aclose()
        await asyncio.gather(*(agent.aclose() for agent in self.agents.values()))

    def specs(self, persona: Persona) -> list[dict[str, Any]]:
        specs = []
        for name in dict.fromkeys(persona.agents):
            agent = self.agents.get(name)
            if agent is not None:
                agent.read_soon()
                specs.append(_spec(agent))
            else:  # perhaps a catalog's, which could not be read yet
                self.catalogs.read_soon(name)
        return specs

    def owns(self, name: str) -> bool:
        return name.startswith(AGENT_PREFIX)

    async def call(
        self, persona: Persona, name: str, arguments: dict[str, Any], turn: Turn
    ) -> AsyncGenerator[ToolUpdate, None]:
        await self.catalogs.ensure(name.removeprefix(AGENT_PREFIX))
        agent = self._agent(persona, name)
        text = arguments.get("message")
        if not isinstance(text, str) or not text.strip():
            raise ToolError(f"{name} needs a 'message': the text to send to {agent.title}")
        # The answer to a question of this agent in this task goes to the task that asked.
        waiting_key = (turn.task_id, agent.name) if turn.task_id else None
        pending = self._waiting.pop(waiting_key, None) if waiting_key is not None else None
        # One remote conversation per (asking conversation, agent).
        conversation = (persona.id, turn.conversation, agent.name)
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=pending.context_id if pending else self._contexts.get(conversation, ""),
            task_id=pending.task_id if pending else "",
        )
        exchange = Exchange(resumed=pending.task_id if pending else "")
        about: dict[str, Any] = {"agent": agent.name}
        outcome = "canceled"
        try:
            async for chunk in self._attempts(agent, SendMessageRequest(message=message), exchange):
                about["taskId"] = exchange.task_id
                yield ToolProgress(chunk, dict(about))
            about.update(taskId=exchange.task_id, state=exchange.state)
            if exchange.context_id:
                _remember(self._contexts, conversation, exchange.context_id)
            outcome, update = self._ending(agent, exchange, waiting_key, about)
            yield update
        except _CallError as error:
            outcome = error.outcome
            raise
        finally:
            self.metrics.remote_calls.labels(agent.name, outcome).inc()

    def _ending(
        self,
        agent: RemoteAgent,
        exchange: Exchange,
        waiting_key: tuple[str, str] | None,
        about: dict[str, Any],
    ) -> tuple[str, ToolUpdate]:
        """The outcome of a call whose attempt ended, and what the model (or user) gets."""
        state = exchange.state
        if state == "completed":
            answer = exchange.answer or "(the agent answered with no text)"
            return "ok", ToolResult(answer, data=about)
        if state == "input-required":
            if waiting_key is not None:
                _remember(
                    self._waiting, waiting_key, _RemoteTask(exchange.task_id, exchange.context_id)
                )
            question = exchange.status_text or "(it asks for more input, without a question)"
            name = agent.card.name if agent.card is not None and agent.card.name else agent.name
            return "input_required", ToolQuestion(f"{name} asks: {question}", data=about)
        why = exchange.status_text or "no reason given"
        if state == "auth-required":
            raise _error(
                "refused",
                f"{agent.title} asks for authentication the hub cannot give (auth-required): {why}",
            )
        raise _error(
            "refused" if state in ("rejected", "canceled") else "error",
            f"{agent.title} could not answer ({state}): {why}",
        )

    async def _attempts(
        self, agent: RemoteAgent, request: SendMessageRequest, exchange: Exchange
    ) -> AsyncGenerator[str, None]:
        """Attempts until one ends (the remote task's state is in ``exchange``), with the
        answer's text as it streams.

        Raises:
            ToolError: the breaker is open, or the last attempt failed (its ``outcome``:
                ``breaker_open``, ``timeout``, ``refused`` or ``error``).
        """
        config = agent.config
        for attempt in range(config.retries + 1):
            try:
                agent.breaker.acquire()
            except BreakerOpenError as error:
                raise _error(
                    "breaker_open",
                    f"{agent.title} is not called for now: its last {error.failures} attempts "
                    f"failed; it is tried again in {math.ceil(error.retry_in)} s",
                ) from None
            healthy: bool | None = None
            streamed = False
            delay = 0.0
            exchange.reset()
            try:
                async for chunk in agent.exchange(request, exchange):
                    streamed = True
                    yield chunk
                if not exchange.state:
                    raise Failure("failure", "its answer ended without a final state")
                # A failed task says the agent is unwell; any other end, that it answers.
                healthy = exchange.state != "failed"
                return
            except Failure as failure:
                healthy = failure.kind == "refused"
                last = attempt == config.retries or failure.kind != "transient" or streamed
                if last:
                    outcome = failure.kind if failure.kind in ("refused", "timeout") else "error"
                    raise _error(
                        outcome, f"{agent.title} could not be called: {failure.message}"
                    ) from None
                delay = min(config.max_backoff, config.backoff * 2**attempt)
                # Jitter, so that hubs refused together do not come back together; the
                # agent's Retry-After when longer (within max_backoff).
                delay *= random.uniform(0.5, 1.0)
                delay = min(config.max_backoff, max(delay, failure.retry_after or 0.0))
                logger.info(
                    "Outside agent %s: attempt %d failed (%s); retrying in %.2f s",
                    agent.name,
                    attempt + 1,
                    failure.message,
                    delay,
                )
                self.metrics.remote_retries.labels(agent.name).inc()
            finally:
                if healthy is None:
                    agent.breaker.release()
                elif healthy:
                    agent.breaker.success()
                else:
                    agent.breaker.failure()
            await self._sleep(delay)

    def _agent(self, persona: Persona, name: str) -> RemoteAgent:
        wanted = name.removeprefix(AGENT_PREFIX)
        agent = self.agents.get(wanted)
        if agent is None:
            raise ToolError(f"No outside agent '{wanted}' is configured")
        if wanted not in persona.agents:
            raise ToolError(f"{persona.id} may not call the outside agent '{wanted}'")
        return agent

    def _breaker_changed(self, name: str, old: str, new: str) -> None:
        agent = self.agents.get(name)
        if new == "open" and agent is not None:
            logger.warning(
                "Outside agent %s: circuit breaker open after %d failed attempts in a row; "
                "calls fail at once for %g s, then one trial call goes",
                name,
                agent.breaker.failures,
                agent.breaker.cool_down,
            )
        else:
            logger.info("Outside agent %s: circuit breaker %s (was %s)", name, new, old)
        self.metrics.remote_breaker.labels(name).set(BREAKER_STATES[new])


class _CallError(ToolError):
    """A call's :class:`ToolError`, with the outcome it is counted as."""

    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


def _error(outcome: str, message: str) -> _CallError:
    return _CallError(outcome, message)


def _remember(store: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > REMEMBERED:
        store.popitem(last=False)


def _spec(agent: RemoteAgent) -> dict[str, Any]:
    card = agent.card
    if agent.config.description is not None:
        description = agent.config.description
    elif card is None:
        description = f"Ask the agent '{agent.name}', outside this hub"
    else:
        description = f"Ask {card.name}, an agent outside this hub: {card.description}"
        skills = "; ".join(f"{skill.name}: {skill.description}" for skill in card.skills[:8])
        if skills:
            description += f" Skills: {skills}"
    who = card.name if card is not None and card.name else agent.name
    return {
        "type": "function",
        "function": {
            "name": agent_tool_name(agent.name),
            "description": description[:1024],
            "parameters": {
                "type": "object",
                "properties": {
                    "message": {
                        "type": "string",
                        "description": (
                            f"What to send to {who}, complete in itself: it does not see "
                            "this conversation"
                        ),
                    }
                },
                "required": ["message"],
            },
        },
    }
