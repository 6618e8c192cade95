"""One A2A agent outside the hub: its card (cached, revalidated with ``If-None-Match``), its
a2a-sdk client on the binding the card prefers, its credential and its circuit breaker.

Every call goes where :class:`~persona_agent.collab.agent_reach.AgentReach` allows: the card
and each request through a transport that judges the URL (a card read from elsewhere than
the host the file names, an interface on another host), the credential only to the hosts
it was configured for. A card is read bounded (:data:`CARD_MAX_BYTES`, :data:`CARD_MAX_DEPTH`).

:meth:`RemoteAgent.exchange` is one attempt: it sends one message and streams the answer
back, or raises a :class:`~persona_agent.collab.agent_exchange.Failure` that says what kind
of failure it was (:class:`~persona_agent.collab.agent_tools.RemoteAgents` decides from it
whether to retry, and what the breaker counts).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import AgentCard, CancelTaskRequest, SendMessageRequest
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseError

from persona_agent.collab.agent_credentials import AgentCredentials, CredentialError
from persona_agent.collab.agent_exchange import (
    Exchange,
    Failure,
    FailureKind,
    failure_of,
    http_status,
    retryable,
)
from persona_agent.collab.agent_reach import AgentReach, Chosen, grpc_channel
from persona_agent.collab.agents_file import BINDING_NAMES, AgentConfig
from persona_agent.collab.breaker import CircuitBreaker
from persona_agent.security.egress.bounded_reads import (
    IDENTITY,
    ReadRefused,
    parse_json,
    read_capped,
)
from persona_agent.security.egress.outbound import GuardedTransport, UrlRefused

__all__ = ["AGENT_PREFIX", "BINDINGS", "RemoteAgent"]

logger = logging.getLogger(__name__)

AGENT_PREFIX = "agent__"
BINDINGS = list(BINDING_NAMES.values())
"""The bindings the hub speaks; of these, the card's first is used (unless the agent's
``bindings:`` says which it prefers)."""
CARD_TIMEOUT = 10.0
"""Seconds a card fetch may take at most (an agent's own ``timeout`` when shorter)."""
CARD_RETRY = 30.0
"""Seconds before a card that could never be read is asked for again (by the tool list)."""
CANCEL_TIMEOUT = 2.0
"""Seconds the cancel of an abandoned remote task may take."""
CARD_MAX_BYTES = 1024 * 1024
"""The largest card read from an agent (a card is a few KB)."""
CARD_MAX_DEPTH = 32
"""The deepest nesting of lists and objects in a card read from an agent."""


@dataclass(slots=True)
class _Card:
    card: AgentCard
    etag: str | None
    checked_at: float
    client: Client


class RemoteAgent:
    """One agent of the agents file. ``clock``: for the card's age and the breaker."""

    def __init__(
        self,
        name: str,
        config: AgentConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_breaker_change: Callable[[str, str, str], None] | None = None,
        card: dict[str, Any] | None = None,
        reach: AgentReach | None = None,
    ) -> None:
        """``card``: the agent's card as an AI Catalog carries it, used as it is (never
        fetched from ``config.card_url``); ``reach``: where it may be called, and its
        credential sent (by default: :meth:`AgentReach.of_agent`)."""
        self.name = name
        self._inline = card
        self.config = config
        self.reach = reach or AgentReach.of_agent(config)
        self._clock = clock
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
            transport=GuardedTransport(self.reach.guard()),
            trust_env=False,  # no proxy: the address judged is the one connected to
        )
        self.credentials = (
            AgentCredentials(config.auth, self.http, clock=clock)
            if config.auth is not None
            else None
        )
        self.breaker = CircuitBreaker(
            config.breaker.threshold,
            config.breaker.cool_down,
            clock=clock,
            on_change=(
                (lambda old, new: on_breaker_change(name, old, new))
                if on_breaker_change is not None
                else None
            ),
        )
        self._card: _Card | None = None
        self._failed_at: float | None = None
        self._card_lock = asyncio.Lock()
        self._refreshing: asyncio.Task[None] | None = None

    @property
    def card(self) -> AgentCard | None:
        """The card last read (``None`` before the first read succeeds)."""
        return self._card.card if self._card is not None else None

    @property
    def title(self) -> str:
        return f"the agent '{self.name}'"

    async def client(self) -> Client:
        """The SDK client for the current card, which is read first when never read, or
        checked again when older than ``card_refresh`` (a card that cannot be read then
        is used as it was, and checked again after another ``card_refresh``).

        Raises:
            Failure: the card was never read, and cannot be now.
        """
        async with self._card_lock:
            cached = self._card
            if cached is not None and self._clock() - cached.checked_at < self.config.card_refresh:
                return cached.client
            try:
                return (await self._read_card()).client
            except Failure as failure:
                self._failed_at = self._clock()
                if cached is None:
                    raise
                logger.warning(
                    "Outside agent %s: its card could not be checked (%s); using the one read "
                    "before",
                    self.name,
                    failure.message,
                )
                cached.checked_at = self._clock()
                return cached.client

    def read_soon(self) -> None:
        """Read a card never read yet in the background (for the tool's description), at
        most every :data:`CARD_RETRY` seconds. A card read before is checked again only
        when the agent is called (:meth:`client`)."""
        if self._card is not None:
            return
        if self._failed_at is not None and self._clock() - self._failed_at < CARD_RETRY:
            return
        if self._refreshing is not None and not self._refreshing.done():
            return
        try:
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh())
        except RuntimeError:  # no event loop: the next call reads it
            return

    async def _refresh(self) -> None:
        try:
            await self.client()
        except Failure as failure:
            logger.info("Outside agent %s: card not read (%s)", self.name, failure.message)

    async def _read_card(self) -> _Card:
        if self._inline is not None:
            return await self._use_card(self._inline)
        cached = self._card
        headers = {"Accept": "application/json", **IDENTITY}
        if cached is not None and cached.etag:
            headers["If-None-Match"] = cached.etag
        url = self.config.card_url
        try:
            request = self.http.build_request(
                "GET", url, headers=headers, timeout=min(self.config.timeout, CARD_TIMEOUT)
            )
            response = await self.http.send(request, stream=True)
        except UrlRefused as error:
            raise Failure("refused", f"its card at {url} may not be read: {error}") from None
        except httpx.HTTPError as error:
            raise Failure("transient", f"its card at {url} could not be read ({error!r})") from None
        try:
            if response.status_code == 304 and cached is not None:
                cached.checked_at = self._clock()
                return cached
            if response.status_code != 200:
                kind: FailureKind = "transient" if retryable(response.status_code) else "refused"
                raise Failure(kind, f"its card at {url} answered HTTP {response.status_code}")
            try:
                data = parse_json(await read_capped(response, CARD_MAX_BYTES), CARD_MAX_DEPTH)
            except ReadRefused as error:
                raise Failure("refused", f"its card at {url} cannot be used: {error}") from None
            except httpx.HTTPError as error:
                message = f"its card at {url} could not be read ({error!r})"
                raise Failure("transient", message) from None
        finally:
            await response.aclose()
        card, client = await self._client_for(data, f"its card at {url}")
        if cached is not None:
            await cached.client.close()
        self._card = _Card(card, response.headers.get("etag"), self._clock(), client)
        self._failed_at = None
        return self._card

    async def _use_card(self, data: dict[str, Any]) -> _Card:
        """A card a catalog carried: checked never again (the catalog is its source)."""
        where = f"its card in the catalog ({self.config.card_url})"
        card, client = await self._client_for(data, where)
        self._card = _Card(card, None, math.inf, client)
        return self._card

    async def _client_for(self, data: Any, where: str) -> tuple[AgentCard, Client]:
        """The card in ``data`` and an SDK client for the interface of it to call.

        Raises:
            Failure: not a card, or no interface of it may be called (``refused``).
        """
        secure = self.config.card_url.startswith("https://")
        chosen = self.config.bindings
        try:
            card = parse_agent_card(data)
            target = await self.reach.choose(
                card, [BINDING_NAMES[b] for b in chosen] if chosen else None, secure=secure
            )
        except UrlRefused as error:
            raise Failure("refused", f"{where} cannot be used: {error}") from None
        except (ValueError, TypeError, AttributeError, ParseError) as error:
            raise Failure("refused", f"{where} cannot be used: {error}") from None
        if self.credentials is not None and not target.credited:
            logger.warning(
                "Outside agent %s: its credential is not sent to %s, not a host it was "
                "configured for (auth.hosts in the agents file adds one)",
                self.name,
                target.interface.url,
            )
        called = AgentCard()
        called.CopyFrom(card)
        del called.supported_interfaces[:]
        called.supported_interfaces.append(target.interface)  # the client calls this one
        try:
            client = ClientFactory(self._client_config(target, secure)).create(
                called,
                interceptors=[self.credentials] if self.credentials and target.credited else None,
            )
        except ValueError as error:
            raise Failure("refused", f"{where} cannot be used: {error}") from None
        return card, client

    def _client_config(self, target: Chosen, secure: bool) -> ClientConfig:
        """The SDK client's configuration: the one binding chosen, gRPC over TLS when the
        card came over HTTPS, to the address judged."""
        return ClientConfig(
            httpx_client=self.http,
            grpc_channel_factory=lambda address: grpc_channel(target.dial, address, secure=secure),
            supported_protocol_bindings=[target.interface.protocol_binding],
            use_client_preference=True,
        )

    async def exchange(
        self, request: SendMessageRequest, exchange: Exchange
    ) -> AsyncGenerator[str, None]:
        """One attempt: the answer's text as it streams, ``exchange`` filled in as it goes.
        The attempt may take ``timeout`` seconds; abandoning it (a timeout, or closing the
        iterator) cancels the remote task.

        Raises:
            Failure: the attempt failed (see :class:`Failure`).
        """
        client = await self.client()
        deadline = asyncio.get_running_loop().time() + self.config.timeout
        stream = client.send_message(request)
        try:
            while not exchange.state:
                try:
                    async with asyncio.timeout_at(deadline):
                        response = await anext(stream)
                except StopAsyncIteration:
                    return
                chunk = exchange.take(response)
                if chunk:
                    yield chunk
        except TimeoutError:
            raise Failure(
                "timeout", f"{self.title} did not answer within {self.config.timeout:g} s"
            ) from None
        except CredentialError as error:
            raise Failure("transient" if error.transient else "refused", error.message) from None
        except A2AError as error:
            token = self.credentials.token if self.credentials is not None else None
            if token is not None and http_status(error) == 401:
                token.forget()  # the token was refused: the next attempt gets another
            raise failure_of(error) from None
        except (ValueError, ParseError) as error:  # an answer the client could not read
            raise Failure("failure", f"its answer could not be read ({error})") from None
        finally:
            if isinstance(stream, AsyncGenerator):
                await stream.aclose()
            if exchange.task_id and not exchange.state:
                await self._cancel(client, exchange.task_id)

    async def _cancel(self, client: Client, task_id: str) -> None:
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT):
                await asyncio.shield(client.cancel_task(CancelTaskRequest(id=task_id)))
        except Exception as error:  # it ended meanwhile, or the agent is gone
            logger.debug("cancel of %s's task %s: %r", self.name, task_id, error)

    async def aclose(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
            await asyncio.gather(self._refreshing, return_exceptions=True)
        if self._card is not None:
            await self._card.client.close()
        await self.http.aclose()
