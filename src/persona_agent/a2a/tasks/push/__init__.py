"""Push notifications: the SDK's sender and config store, guarded against SSRF, capped,
and delivered per destination.

A client gives a webhook URL (``CreateTaskPushNotificationConfig``, or with a message);
the hub then POSTs every change of the task to it. The parts, each implementing the
SDK's interface for it:

- :class:`~persona_agent.security.egress.push_urls.PushUrlGuard`, the
  ``push_url_validator`` (SSRF), checked when a config is created and before every
  delivery attempt;
- :mod:`.configs`: :class:`IndexedConfigStore`, configs in the SDK's database table
  (:mod:`.config_rows`), with an index of the tasks that have configs and caps per task
  and per caller;
- :mod:`.sender`: :class:`RetryingPushSender`, the SDK's sender with a queue and a worker
  per destination, so one slow or failing webhook never delays another;
- :mod:`.delivery`: one notification POSTed and retried.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from persona_agent.a2a.tasks.push.configs import ConfigLimits, IndexedConfigStore
from persona_agent.a2a.tasks.push.delivery import Retries
from persona_agent.a2a.tasks.push.sender import DeliveryLimits, RetryingPushSender
from persona_agent.security.egress.push_urls import MAX_URL_LENGTH, PushUrlGuard, embedded_ipv4

__all__ = [
    "MAX_URL_LENGTH",
    "ConfigLimits",
    "DeliveryLimits",
    "IndexedConfigStore",
    "PushParts",
    "PushUrlGuard",
    "Retries",
    "RetryingPushSender",
    "embedded_ipv4",
]


@dataclass(frozen=True, slots=True)
class PushParts:
    """What every persona's SDK handler takes for push notifications."""

    store: IndexedConfigStore
    sender: RetryingPushSender
    guard: PushUrlGuard
    http: httpx.AsyncClient
    """The sender's HTTP client (no redirects followed), closed with it."""

    async def aclose(self) -> None:
        """Deliver what is queued (a few seconds at most), then close the client."""
        await self.sender.aclose()
        await self.http.aclose()
