"""Push notifications from the settings: the parts every persona's SDK handler takes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from a2a.server.tasks import DatabasePushNotificationConfigStore
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.push import (
    ConfigLimits,
    DeliveryLimits,
    IndexedConfigStore,
    PushParts,
    PushUrlGuard,
    RetryingPushSender,
)
from persona_agent.a2a.task_store import persona_owner
from persona_agent.observe.metrics import HubMetrics
from persona_agent.settings import Settings

__all__ = ["build_push"]


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
    http = httpx.AsyncClient(
        timeout=10,
        follow_redirects=False,
        limits=httpx.Limits(max_connections=destinations, max_keepalive_connections=20),
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
