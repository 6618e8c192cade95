"""Push notifications: the SDK's sender and config store, guarded against SSRF, retried.

A client gives a webhook URL (``CreateTaskPushNotificationConfig``, or with a message);
the hub then POSTs every change of the task to it. The URL is the client's choice, so it
is checked when the config is created (the SDK's handler takes :class:`PushUrlGuard`, of
:mod:`persona_agent.a2a.push.guard`, as its ``push_url_validator``) and again before every
delivery attempt (a name's DNS answer may change). The HTTP client follows no redirect: a
3xx is a failure, so no webhook can bounce a notification to an address the guard refused.

:class:`RetryingPushSender` is the SDK's ``BasePushNotificationSender`` with delivery moved
off the task: ``send_notification`` queues the event and returns; a background worker
delivers in order, retrying a connection error, a timeout, a 5xx or a 429 with exponential
backoff (``Retry-After`` honoured), never a refusal or another 4xx. A slow or failing
webhook never slows or fails a task; a full queue drops the notification with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.server.context import ServerCallContext
from a2a.server.tasks import (
    BasePushNotificationSender,
    DatabasePushNotificationConfigStore,
    PushNotificationConfigStore,
)
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict
from sqlalchemy import select

from persona_agent.a2a.push.guard import MAX_URL_LENGTH, PushUrlGuard, destination
from persona_agent.a2a.sdk_fixes.numbers import counts_as_integers

__all__ = [
    "MAX_URL_LENGTH",
    "IndexedConfigStore",
    "PushParts",
    "PushUrlGuard",
    "RetryingPushSender",
]

logger = logging.getLogger(__name__)


class IndexedConfigStore(PushNotificationConfigStore):
    """The SDK's database config store, plus the set of tasks that have a config.

    The SDK's handler offers every event of every task to the sender, and its store
    answers "which webhooks?" with a query: a query for each streamed token of every
    task, almost none of which has a webhook. This store reads the task ids that have
    configs once, keeps the set up to date as configs are set and deleted through it, and
    answers :meth:`has_configs` from memory. Replicas share the set: ``announce`` tells
    the others of each task given a config (they call :meth:`heard`), since a task may run
    on a replica other than the one its config was set through.
    """

    def __init__(
        self,
        inner: DatabasePushNotificationConfigStore,
        *,
        announce: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self._inner = inner
        self._tasks: set[str] | None = None
        self._lock = asyncio.Lock()
        self._announce = announce

    def heard(self, task_id: str) -> None:
        """Another replica set a config for ``task_id``."""
        if self._tasks is not None:
            self._tasks.add(task_id)

    async def has_configs(self, task_id: str) -> bool:
        if self._tasks is None:
            async with self._lock:
                if self._tasks is None:
                    self._tasks = await self._load()
        return task_id in self._tasks

    async def _load(self) -> set[str]:
        inner = self._inner
        await inner._ensure_initialized()  # the SDK creates its table on first use
        async with inner.async_session_maker() as session:
            result = await session.execute(select(inner.config_model.task_id).distinct())
            return {str(task_id) for task_id in result.scalars()}

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig | None:
        saved = await self._inner.set_info(task_id, notification_config, context)
        self.heard(task_id)
        if self._announce is not None:
            await self._announce(task_id)
        return saved

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return await self._inner.get_info(task_id, context)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        if not await self.has_configs(task_id):
            return []
        return await self._inner.get_info_for_dispatch(task_id)

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self._inner.delete_info(task_id, context, config_id)
        if self._tasks is not None and not await self._inner.get_info_for_dispatch(task_id):
            self._tasks.discard(task_id)


@dataclass(frozen=True, slots=True)
class PushParts:
    """What every persona's SDK handler takes for push notifications."""

    store: IndexedConfigStore
    sender: RetryingPushSender
    guard: PushUrlGuard


class _Failed(Exception):
    def __init__(self, reason: str, *, retry: bool, wait: float | None = None) -> None:
        self.reason, self.retry, self.wait = reason, retry, wait
        super().__init__(reason)


class RetryingPushSender(BasePushNotificationSender):
    """The SDK's sender, delivering from a queue with retries (see the module docstring)."""

    def __init__(
        self,
        httpx_client: httpx.AsyncClient,
        config_store: PushNotificationConfigStore,
        *,
        push_url_validator: PushUrlGuard,
        attempts: int = 5,
        first_delay: float = 0.5,
        max_delay: float = 30.0,
        max_pending: int = 1000,
    ) -> None:
        super().__init__(httpx_client, config_store, push_url_validator=push_url_validator)
        self._guard = push_url_validator
        self.attempts = attempts
        self.first_delay = first_delay
        self.max_delay = max_delay
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(max_pending)
        self._worker: asyncio.Task[None] | None = None

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Queue the event for delivery; return at once. The body is made now: the event
        may be changed afterwards (a task snapshot is), and it must say what it said."""
        store = self._config_store
        if isinstance(store, IndexedConfigStore) and not await store.has_configs(task_id):
            return  # most tasks: no webhook, nothing to build
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._deliver_all(), name="push-notifications")
        body = MessageToDict(to_stream_response(event))
        counts_as_integers(body)
        try:
            self._queue.put_nowait((task_id, body))
        except asyncio.QueueFull:
            logger.warning("Push notification for task %s dropped: the queue is full", task_id)

    async def aclose(self, grace: float = 5.0) -> None:
        """Deliver what is queued (for ``grace`` seconds at most), then stop."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), grace)
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker

    async def _deliver_all(self) -> None:
        while True:
            task_id, body = await self._queue.get()
            try:
                configs = await self._config_store.get_info_for_dispatch(task_id)
                for config in configs:
                    await self._deliver(task_id, body, config)
            except Exception:
                logger.exception("Push notifications for task %s failed", task_id)
            finally:
                self._queue.task_done()

    async def _deliver(
        self, task_id: str, body: dict[str, Any], config: TaskPushNotificationConfig
    ) -> None:
        delay = self.first_delay
        for attempt in range(1, self.attempts + 1):
            try:
                await self._post(body, config)
                return
            except _Failed as failure:
                last = attempt == self.attempts or not failure.retry
                logger.warning(
                    "Push notification for task %s to %s failed (attempt %d/%d): %s%s",
                    task_id,
                    destination(config.url),
                    attempt,
                    self.attempts,
                    failure.reason,
                    "" if last else "; retrying",
                )
                if last:
                    return
                wait = failure.wait if failure.wait is not None else delay
                await asyncio.sleep(min(self.max_delay, wait) * random.uniform(0.9, 1.1))
                delay = min(self.max_delay, delay * 2)

    async def _post(self, body: dict[str, Any], config: TaskPushNotificationConfig) -> None:
        """One attempt, with the SDK sender's body and headers."""
        if not await self._guard(config.url):
            raise _Failed("the URL is refused", retry=False)
        headers: dict[str, str] = {}
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        auth = config.authentication
        if config.HasField("authentication") and auth.scheme and auth.credentials:
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        try:
            response = await self._client.post(
                config.url,
                json=body,
                headers=headers,
                follow_redirects=False,
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
