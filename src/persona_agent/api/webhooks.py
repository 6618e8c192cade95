"""Push notifications from the settings: the parts every persona's SDK handler takes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
from a2a.server.tasks import DatabasePushNotificationConfigStore
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.tasks.push import (
    ConfigLimits,
    DeliveryLimits,
    IndexedConfigStore,
    PushParts,
    PushUrlGuard,
    RetryingPushSender,
)
from persona_agent.a2a.tasks.task_store import persona_owner
from persona_agent.observe.metrics import HubMetrics
from persona_agent.settings import Settings

__all__ = ["build_push"]


class _OnDemandTransport(httpx.AsyncBaseTransport):
    """httpx's own transport, made for the first webhook call: making it imports httpcore
    and reads the CA bundle (about 3 MB, and 40 ms: in a worker thread), which a hub whose
    tasks have no webhook never needs."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._made: httpx.AsyncHTTPTransport | None = None
        self._making = asyncio.Lock()

    async def _transport(self) -> httpx.AsyncHTTPTransport:
        if self._made is None:
            async with self._making:
                if self._made is None:
                    self._made = await asyncio.to_thread(
                        httpx.AsyncHTTPTransport, limits=self._limits
                    )
        return self._made

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await (await self._transport()).handle_async_request(request)

    async def aclose(self) -> None:
        if self._made is not None:
            await self._made.aclose()


def build_push(
    settings: Settings,
    db: AsyncEngine,
    *,
    announce: Callable[[str], Awaitable[None]] | None,
    metrics: HubMetrics,
) -> PushParts:
    """Configs in the hub's database (durable, owned as tasks are, capped); webhooks
    guarded, and called per destination by a client of their own that follows no
    redirect. ``announce``: replicas, tell the others of a task given a config."""
    store = IndexedConfigStore(
        DatabasePushNotificationConfigStore(
            db, owner_resolver=persona_owner, encryption_key=settings.push_config_key
        ),
        announce=announce,
        limits=ConfigLimits(
            per_task=settings.push_max_configs_per_task,
            per_caller=settings.push_max_configs_per_caller,
        ),
    )
    # A connection for each destination's worker: the pool never makes one destination
    # wait for another's.
    destinations = settings.push_max_destinations
    limits = httpx.Limits(max_connections=destinations, max_keepalive_connections=20)
    http = httpx.AsyncClient(
        timeout=10, follow_redirects=False, transport=_OnDemandTransport(limits)
    )
    guard = PushUrlGuard(settings.push_allowed_host_list)
    sender = RetryingPushSender(
        http,
        store,
        push_url_validator=guard,
        limits=DeliveryLimits(
            per_destination=settings.push_queue_per_destination,
            destinations=destinations,
            queued_bytes=settings.push_queue_bytes,
        ),
        metrics=metrics,
    )
    return PushParts(store, sender, guard, http)
