"""One A2A agent outside the hub: its card (cached, revalidated with ``If-None-Match``), its
a2a-sdk client on the binding the card prefers, its credential and its circuit breaker.

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

import grpc
import grpc.aio
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
from persona_agent.collab.agents_file import BINDING_NAMES, AgentConfig
from persona_agent.collab.breaker import CircuitBreaker

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
    ) -> None:
        """``card``: the agent's card as an AI Catalog carries it, used as it is (never
        fetched from ``config.card_url``)."""
        self.name = name
        self._inline = card
        self.config = config
        self._clock = clock
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout)
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
            return self._use_card(self._inline)
        cached = self._card
        headers = {"Accept": "application/json"}
        if cached is not None and cached.etag:
            headers["If-None-Match"] = cached.etag
        url = self.config.card_url
        try:
            response = await self.http.get(
                url, headers=headers, timeout=min(self.config.timeout, CARD_TIMEOUT)
            )
        except httpx.HTTPError as error:
            raise Failure("transient", f"its card at {url} could not be read ({error!r})") from None
        if response.status_code == 304 and cached is not None:
            cached.checked_at = self._clock()
            return cached
        if response.status_code != 200:
            kind: FailureKind = "transient" if retryable(response.status_code) else "refused"
            raise Failure(kind, f"its card at {url} answered HTTP {response.status_code}")
        try:
            card = parse_agent_card(response.json())
            client = ClientFactory(self._client_config(url)).create(
                card, interceptors=[self.credentials] if self.credentials else None
            )
        except (ValueError, ParseError) as error:  # not JSON, not a card, no binding we speak
            raise Failure("refused", f"its card at {url} cannot be used: {error}") from None
        if cached is not None:
            await cached.client.close()
        self._card = _Card(card, response.headers.get("etag"), self._clock(), client)
        self._failed_at = None
        return self._card

    def _use_card(self, data: dict[str, Any]) -> _Card:
        """A card a catalog carried: checked never again (the catalog is its source)."""
        try:
            card = parse_agent_card(data)
            client = ClientFactory(self._client_config(self.config.card_url)).create(
                card, interceptors=[self.credentials] if self.credentials else None
            )
        except (ValueError, ParseError) as error:
            where = self.config.card_url
            message = f"its card in the catalog ({where}) cannot be used: {error}"
            raise Failure("refused", message) from None
        self._card = _Card(card, None, math.inf, client)
        return self._card

    def _client_config(self, card_url: str) -> ClientConfig:
        """The SDK client's configuration: its bindings (the agent's ``bindings:`` in its
        order, else the card's order), gRPC over TLS when the card came over HTTPS."""
        chosen = self.config.bindings
        secure = card_url.startswith("https://")

        def channel(address: str) -> grpc.aio.Channel:
            if secure:
                return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials())
            return grpc.aio.insecure_channel(address)

        return ClientConfig(
            httpx_client=self.http,
            grpc_channel_factory=channel,
            supported_protocol_bindings=[BINDING_NAMES[b] for b in chosen] if chosen else BINDINGS,
            use_client_preference=chosen is not None,
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
