"""One notification to one webhook: POSTed, retried with backoff, its outcome counted.

Retried: a connection error, a timeout, a 5xx or a 429, with exponential backoff
(``Retry-After`` in seconds honoured, capped at ``max_delay``). Never retried: a refusal
by the URL guard, a redirect (never followed: a webhook cannot bounce a notification to
an address the guard refused) or another 4xx.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass

import httpx
from a2a.types.a2a_pb2 import TaskPushNotificationConfig

from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from persona_agent.security.egress.push_urls import PushUrlGuard, destination

__all__ = ["Delivery", "Retries", "deliver"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Delivery:
    """A notification for one config: the JSON body, made when the event happened."""

    task_id: str
    body: bytes
    config: TaskPushNotificationConfig


@dataclass(frozen=True, slots=True)
class Retries:
    attempts: int = 5
    first_delay: float = 0.5
    max_delay: float = 30.0


class _Failed(Exception):
    def __init__(self, reason: str, *, retry: bool, wait: float | None = None) -> None:
        self.reason, self.retry, self.wait = reason, retry, wait
        super().__init__(reason)


async def deliver(
    client: httpx.AsyncClient,
    guard: PushUrlGuard,
    delivery: Delivery,
    retries: Retries,
    metrics: HubMetrics = NO_METRICS,
) -> None:
    """POST ``delivery`` until it is accepted, refused, or the attempts are spent (the
    waits between attempts included: the caller's queue waits with it)."""
    delay = retries.first_delay
    for attempt in range(1, retries.attempts + 1):
        try:
            await _post(client, guard, delivery)
        except _Failed as failure:
            last = attempt == retries.attempts or not failure.retry
            logger.warning(
                "Push notification for task %s to %s failed (attempt %d/%d): %s%s",
                delivery.task_id,
                destination(delivery.config.url),
                attempt,
                retries.attempts,
                failure.reason,
                "" if last else "; retrying",
            )
            if not last:
                wait = failure.wait if failure.wait is not None else delay
                await asyncio.sleep(min(retries.max_delay, wait) * random.uniform(0.9, 1.1))
                delay = min(retries.max_delay, delay * 2)
                continue
            refused = failure.reason == _REFUSED
            metrics.push_notifications.labels("refused" if refused else "failed").inc()
            return
        metrics.push_notifications.labels("delivered").inc()
        return


_REFUSED = "the URL is refused"


async def _post(client: httpx.AsyncClient, guard: PushUrlGuard, delivery: Delivery) -> None:
    """One attempt, with the SDK sender's headers."""
    config = delivery.config
    if not await guard(config.url):
        raise _Failed(_REFUSED, retry=False)
    headers = {"Content-Type": "application/json"}
    if config.token:
        headers["X-A2A-Notification-Token"] = config.token
    auth = config.authentication
    if config.HasField("authentication") and auth.scheme and auth.credentials:
        headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
    try:
        response = await client.post(
            config.url, content=delivery.body, headers=headers, follow_redirects=False
        )
    except httpx.TimeoutException:
        raise _Failed("timed out", retry=True) from None
    except httpx.HTTPError as error:
        raise _Failed(f"{type(error).__name__}", retry=True) from None
    status = response.status_code
    if status < 300:
        return
    if status == 429 or status >= 500:
        retry_after = response.headers.get("retry-after", "")
        wait = float(retry_after) if retry_after.isdigit() else None
        raise _Failed(f"HTTP {status}", retry=True, wait=wait)
    what = "a redirect, not followed" if 300 <= status < 400 else f"HTTP {status}"
    raise _Failed(what, retry=False)
