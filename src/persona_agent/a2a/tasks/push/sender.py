"""Push delivery per destination: one slow or failing webhook never delays another.

:class:`RetryingPushSender` is the SDK's ``BasePushNotificationSender`` with delivery moved
off the task. ``send_notification`` makes the body (the event may change afterwards: a
task snapshot does) and queues it; it never waits for a webhook. A router reads the
task's configs and puts one delivery per config on the queue of its destination
(``scheme://host:port``), in the order the events came. Each destination has a queue and
a worker of its own, started on demand and gone when idle: it delivers in order, and its
retries, backoff and ``Retry-After`` waits hold back that destination only.

Everything is bounded (:class:`DeliveryLimits`): events waiting to be routed, deliveries
queued per destination, destinations with a live worker, and the bytes of every body
queued anywhere. Past a bound the notification is dropped, with a warning in the log and
``persona_agent_push_notifications{outcome="dropped"}`` counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field

import httpx
from a2a.server.tasks import BasePushNotificationSender, PushNotificationConfigStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from persona_agent.a2a.sdk_fixes.numbers import counts_as_integers
from persona_agent.a2a.tasks.push.configs import IndexedConfigStore
from persona_agent.a2a.tasks.push.delivery import Delivery, Retries, deliver
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.security.egress.push_urls import PushUrlGuard, destination

__all__ = ["DeliveryLimits", "RetryingPushSender"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeliveryLimits:
    """How much may wait for delivery (settings named where they are)."""

    per_destination: int = 100
    """Deliveries queued for one destination (``PERSONA_AGENT_PUSH_QUEUE_PER_DESTINATION``)."""
    destinations: int = 64
    """Destinations with a live worker (``PERSONA_AGENT_PUSH_MAX_DESTINATIONS``)."""
    queued_bytes: int = 32 * 1024 * 1024
    """Bytes of bodies queued, everywhere (``PERSONA_AGENT_PUSH_QUEUE_BYTES``)."""
    pending: int = 1000
    """Events waiting for their configs to be read."""
    idle_seconds: float = 30.0
    """A destination's worker with nothing to deliver for this long stops."""


@dataclass(eq=False)
class _Destination:
    queue: asyncio.Queue[Delivery]
    worker: asyncio.Task[None] | None = field(default=None)


class RetryingPushSender(BasePushNotificationSender):
    """The SDK's sender, delivering per destination with retries (module docstring)."""

    def __init__(
        self,
        httpx_client: httpx.AsyncClient,
        config_store: PushNotificationConfigStore,
        *,
        push_url_validator: PushUrlGuard,
        retries: Retries | None = None,
        limits: DeliveryLimits | None = None,
        metrics: HubMetrics = NO_METRICS,
    ) -> None:
        super().__init__(httpx_client, config_store, push_url_validator=push_url_validator)
        self._guard = push_url_validator
        self.retries = retries or Retries()
        self.limits = limits or DeliveryLimits()
        self._metrics = metrics
        self._pending: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(self.limits.pending)
        self._router: asyncio.Task[None] | None = None
        self._destinations: dict[str, _Destination] = {}
        self._queued_bytes = 0

    @property
    def destinations(self) -> int:
        """Destinations with a live worker now."""
        return len(self._destinations)

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Queue the event for delivery; return at once."""
        store = self._config_store
        if isinstance(store, IndexedConfigStore) and not await store.has_configs(task_id):
            return  # most tasks: no webhook, nothing to build
        body = MessageToDict(to_stream_response(event))
        counts_as_integers(body)
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        if self._pending.full():
            self._dropped(task_id, "the hub", "events wait to be routed (1,000 at most)")
            return
        if not self._reserve(len(payload)):
            self._dropped(task_id, "the hub", _BYTES_FULL)
            return
        self._pending.put_nowait((task_id, payload))
        if self._router is None or self._router.done():
            self._router = asyncio.create_task(self._route_all(), name="push-routing")

    async def aclose(self, grace: float = 5.0) -> None:
        """Deliver what is queued (for ``grace`` seconds at most), then stop."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self._pending.join()
                for place in list(self._destinations.values()):
                    await place.queue.join()
        tasks = [self._router] + [place.worker for place in self._destinations.values()]
        self._router = None
        for task in tasks:
            if task is not None:
                task.cancel()
        for task in tasks:
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._destinations.clear()

    async def _route_all(self) -> None:
        """Each event, in order, to the queue of each of its configs' destinations."""
        while True:
            task_id, payload = await self._pending.get()
            try:
                configs = await self._config_store.get_info_for_dispatch(task_id)
                for config in configs:
                    self._route(Delivery(task_id, payload, config))
            except Exception:
                logger.exception("Push notifications for task %s could not be routed", task_id)
            finally:
                self._release(len(payload))
                self._pending.task_done()

    def _route(self, delivery: Delivery) -> None:
        where = destination(delivery.config.url)
        place = self._destinations.get(where)
        if place is None:
            if len(self._destinations) >= self.limits.destinations:
                self._dropped(delivery.task_id, where, _DESTINATIONS_FULL)
                return
            place = _Destination(asyncio.Queue(self.limits.per_destination))
            place.worker = asyncio.create_task(self._work(where, place), name=f"push {where}")
            self._destinations[where] = place
        if place.queue.full():
            self._dropped(delivery.task_id, where, _QUEUE_FULL)
        elif not self._reserve(len(delivery.body)):
            self._dropped(delivery.task_id, where, _BYTES_FULL)
        else:
            place.queue.put_nowait(delivery)

    async def _work(self, where: str, place: _Destination) -> None:
        """Deliver ``where``'s queue in order; stop when idle."""
        queue = place.queue
        try:
            while True:
                try:
                    async with asyncio.timeout(self.limits.idle_seconds):
                        delivery = await queue.get()
                except TimeoutError:
                    if queue.empty():
                        return  # (no await before the finally: nothing is queued meanwhile)
                    continue
                try:
                    await deliver(self._client, self._guard, delivery, self.retries, self._metrics)
                except Exception:
                    logger.exception("Push notification to %s failed", where)
                finally:
                    self._release(len(delivery.body))
                    queue.task_done()
        finally:
            if self._destinations.get(where) is place:
                del self._destinations[where]

    def _reserve(self, size: int) -> bool:
        if self._queued_bytes + size > self.limits.queued_bytes:
            return False
        self._queued_bytes += size
        return True

    def _release(self, size: int) -> None:
        self._queued_bytes -= size

    def _dropped(self, task_id: str, where: str, why: str) -> None:
        logger.warning("Push notification for task %s to %s dropped: %s", task_id, where, why)
        self._metrics.push_notifications.labels("dropped").inc()


_QUEUE_FULL = "its queue is full (PERSONA_AGENT_PUSH_QUEUE_PER_DESTINATION)"
_DESTINATIONS_FULL = (
    "too many other destinations are being delivered to (PERSONA_AGENT_PUSH_MAX_DESTINATIONS)"
)
_BYTES_FULL = "queued notifications fill PERSONA_AGENT_PUSH_QUEUE_BYTES"
