"""Push notifications guarded against SSRF, delivered off the task, with retries.

A2A clients choose the webhook URL of a push-notification config, and the hub then POSTs
every change of the task to it: without a check, a client could make the hub call its own
network (loopback services, ``169.254.169.254`` cloud metadata, private hosts). Two pieces:

* :class:`PushUrlGuard` is an async ``push_url_validator``. It runs when a config is
  created (the SDK's request handler takes the same validator) and again before every
  delivery attempt (a name's DNS answer may change between the two). It refuses
  credentials in the URL (``user:pass@``), schemes other than http(s), empty hosts and
  URLs longer than 2048 characters, then hands the URL to the SDK's
  ``validate_push_notification_url``, which resolves the host with the event loop's
  resolver and refuses loopback, private, link-local, shared, multicast, reserved and
  unspecified addresses (an IPv4-mapped IPv6 address as the IPv4 inside it; decimal,
  octal and hex forms resolve to what they stand for). The hosts of
  ``PERSONA_AGENT_PUSH_ALLOWED_HOSTS`` (``host`` or ``host:port``) skip the address check:
  that is the local-development escape hatch, and loopback is refused unless listed.
  Refusals are logged with the URL's ``scheme://host:port`` only: a path, a query or
  userinfo may carry secrets.

* :class:`RetryingPushSender` is the SDK's ``BasePushNotificationSender`` with delivery
  moved off the task: ``send_notification`` puts the event on a bounded queue and returns
  (a full queue drops it with a warning); one background worker delivers in order,
  retrying connection errors, timeouts, 5xx and 429 with exponential backoff
  (``Retry-After`` honoured), never a refusal, a redirect or another 4xx. Redirects are
  not followed: a webhook answering 3xx could otherwise bounce the POST to an address the
  guard refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpx
from a2a.server.context import ServerCallContext
from a2a.server.tasks.base_push_notification_sender import BasePushNotificationSender
from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from a2a.utils.push_url_validator import validate_push_notification_url
from google.protobuf.json_format import MessageToDict

__all__ = ["MAX_URL_LENGTH", "PushUrlGuard", "RetryingPushSender", "safe_url"]

logger = logging.getLogger(__name__)

MAX_URL_LENGTH = 2048
"""The longest webhook URL accepted."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


def safe_url(url: str) -> str:
    """``scheme://host[:port]`` of a URL, for logs: never its path, query or userinfo."""
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port
    except ValueError:
        return "(unparseable URL)"
    host = parsed.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parsed.scheme}://{host}{f':{port}' if port is not None else ''}"


def _normalise_allowed(entry: str) -> str:
    """An allow-list entry as compared: lowercased, IPv6 without brackets."""
    entry = entry.strip().lower()
    if entry.startswith("["):
        address, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        return f"{address}:{port}" if port else address
    return entry


class PushUrlGuard:
    """Whether a webhook URL may be called: an async ``push_url_validator``.

    ``allowed_hosts`` (``host`` or ``host:port``; IPv6 with or without brackets) are
    accepted over http(s) without the address check; every other URL must resolve to
    public addresses only (the SDK's ``validate_push_notification_url``).
    """

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self.allowed_hosts: frozenset[str] = frozenset(
            normalised for normalised in map(_normalise_allowed, allowed_hosts) if normalised
        )

    def _refuse(self, url: str, reason: str) -> bool:
        logger.warning("Push URL %s refused: %s", safe_url(url), reason)
        return False

    async def __call__(self, url: str) -> bool:
        if len(url) > MAX_URL_LENGTH:
            return self._refuse(url, f"longer than {MAX_URL_LENGTH} characters")
        try:
            parsed = urllib.parse.urlsplit(url)
            port = parsed.port
        except ValueError:
            logger.warning("Push URL refused: it cannot be parsed")
            return False
        scheme = parsed.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            return self._refuse(url, "the scheme is not http or https")
        if "@" in parsed.netloc:
            return self._refuse(url, "it carries credentials")
        host = (parsed.hostname or "").lower()
        if not host:
            return self._refuse(url, "it has no host")
        effective_port = port if port is not None else _DEFAULT_PORTS[scheme]
        bare = host.rstrip(".") or host
        if {bare, f"{bare}:{effective_port}"} & self.allowed_hosts:
            return True
        # The SDK's validator logs the URL it is given: give it only scheme, host and
        # port (all it needs), so no token in a path or query reaches the log.
        if not await validate_push_notification_url(f"{safe_url(url)}/"):
            return self._refuse(url, "its host is not a public address")
        return True


class _Failed(Exception):
    """One delivery attempt failed; ``retry`` says whether another may succeed."""

    def __init__(self, reason: str, *, retry: bool, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.wait = wait


def _retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header (its HTTP-date form is ignored)."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 and seconds == seconds else None  # not NaN


class RetryingPushSender(BasePushNotificationSender):
    """The SDK's push sender, delivering from a bounded queue with retries.

    ``send_notification`` returns at once: the event's JSON body is built then (the event
    may change afterwards) and queued; a background worker, started on first use in the
    running loop, looks up the task's configs and delivers to each, in order. An attempt
    is retried after a connection error, a timeout, a 5xx or a 429 (``attempts`` in all,
    waiting ``first_delay`` doubled each time up to ``max_delay``, with a little jitter,
    or the ``Retry-After`` seconds, capped at ``max_delay``); a 4xx, a refused URL and a
    redirect are not retried.

    Redirects are never followed (each request sets ``follow_redirects=False``): a 3xx
    is a failure, because its target was not screened by the validator and could be a
    private address. The validator runs before every attempt. Without a
    ``push_url_validator`` the SDK's ``validate_push_notification_url`` is used (the
    SDK's own sender screens nothing then). Failures are logged with the URL's
    ``scheme://host:port`` only, never the token or credentials.
    """

    def __init__(
        self,
        httpx_client: httpx.AsyncClient,
        config_store: PushNotificationConfigStore,
        context: ServerCallContext | None = None,
        *,
        push_url_validator: Callable[[str], Awaitable[bool]] | None = None,
        attempts: int = 5,
        first_delay: float = 0.5,
        max_delay: float = 30.0,
        timeout: float = 10.0,
        max_pending: int = 1000,
    ) -> None:
        super().__init__(
            httpx_client,
            config_store,
            context,
            push_url_validator=push_url_validator or validate_push_notification_url,
        )
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self.attempts = attempts
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.timeout = timeout
        self.max_pending = max_pending
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def running(self) -> bool:
        """Whether the background worker is running."""
        return self._worker is not None and not self._worker.done()

    @property
    def pending(self) -> int:
        """Notifications queued and not yet taken by the worker."""
        return self._queue.qsize() if self._queue is not None else 0

    def _ensure_worker(self) -> asyncio.Queue[tuple[str, dict[str, Any]]]:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop:
            # First use, or a new event loop (the old loop's queue and worker are dead).
            self._queue = asyncio.Queue(self.max_pending)
            self._loop = loop
            self._worker = None
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(
                self._run(self._queue), name="persona-agent-push-notifications"
            )
        return self._queue

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        """Queue the event for delivery and return; never raises, never blocks."""
        try:
            queue = self._ensure_worker()
            body = MessageToDict(to_stream_response(event))
        except Exception:
            logger.exception("Push notification for task %s could not be queued", task_id)
            return
        try:
            queue.put_nowait((task_id, body))
        except asyncio.QueueFull:
            logger.warning(
                "Push notification for task %s dropped: %d notifications already pending",
                task_id,
                self.max_pending,
            )

    async def aclose(self, grace: float = 2.0) -> None:
        """Let queued notifications be delivered for ``grace`` seconds, then stop the worker."""
        worker, queue = self._worker, self._queue
        self._worker = None
        if worker is None or worker.done():
            return
        if queue is not None and asyncio.get_running_loop() is self._loop:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(queue.join(), grace)
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker
        self._queue = None

    async def _run(self, queue: asyncio.Queue[tuple[str, dict[str, Any]]]) -> None:
        while True:
            task_id, body = await queue.get()
            try:
                await self._deliver_all(task_id, body)
            except Exception:
                logger.exception("Push notifications for task %s failed", task_id)
            finally:
                queue.task_done()

    async def _deliver_all(self, task_id: str, body: dict[str, Any]) -> None:
        has_configs = getattr(self._config_store, "has_configs", None)
        if has_configs is not None and not await has_configs(task_id):
            return  # a store that knows cheaply that the task has no webhook
        configs = await self._config_store.get_info_for_dispatch(task_id)
        for config in configs:
            await self._deliver(task_id, body, config)

    def _backoff(self, attempt: int) -> float:
        delay = min(self.max_delay, self.first_delay * 2 ** (attempt - 1))
        return float(delay * random.uniform(0.9, 1.1))

    async def _deliver(
        self, task_id: str, body: dict[str, Any], config: TaskPushNotificationConfig
    ) -> bool:
        for attempt in range(1, self.attempts + 1):
            try:
                await self._attempt(task_id, body, config)
            except _Failed as failure:
                last = not failure.retry or attempt == self.attempts
                logger.warning(
                    "Push notification for task %s to %s failed (attempt %d of %d): %s%s",
                    task_id,
                    safe_url(config.url),
                    attempt,
                    self.attempts,
                    failure.reason,
                    "" if last else "; retrying",
                )
                if last:
                    return False
                wait = (
                    min(self.max_delay, failure.wait)
                    if failure.wait is not None
                    else self._backoff(attempt)
                )
                await asyncio.sleep(wait)
            else:
                logger.info(
                    "Push notification for task %s sent to %s", task_id, safe_url(config.url)
                )
                return True
        return False

    def _headers(self, task_id: str, config: TaskPushNotificationConfig) -> dict[str, str]:
        """The SDK sender's headers (``_dispatch_notification``), exactly."""
        headers: dict[str, str] = {}
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        auth = config.authentication
        if config.HasField("authentication"):
            if auth.scheme and auth.credentials:
                headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
            elif auth.scheme:
                logger.warning(
                    "Push config %s sets an authentication scheme with no credentials; "
                    "sending no Authorization header for task %s",
                    config.id,
                    task_id,
                )
        return headers

    async def _attempt(
        self, task_id: str, body: dict[str, Any], config: TaskPushNotificationConfig
    ) -> None:
        """One POST, screened first; raises :class:`_Failed` unless it got a 2xx."""
        validator = self._push_url_validator
        assert validator is not None  # set in __init__
        try:
            accepted = await validator(config.url)
        except Exception:
            logger.exception("Push URL validator raised for %s", safe_url(config.url))
            accepted = False
        if not accepted:
            raise _Failed("the URL is refused", retry=False)
        try:
            response = await self._client.post(
                config.url,
                json=body,
                headers=self._headers(task_id, config),
                timeout=self.timeout,
                follow_redirects=False,
            )
        except httpx.TimeoutException:
            raise _Failed("timed out", retry=True) from None
        except httpx.TransportError as error:
            raise _Failed(f"connection failed ({type(error).__name__})", retry=True) from None
        except httpx.HTTPError as error:
            raise _Failed(f"request failed ({type(error).__name__})", retry=False) from None
        status = response.status_code
        if 200 <= status < 300:
            return
        if status == 429 or status >= 500:
            wait = _retry_after(response.headers.get("Retry-After"))
            raise _Failed(f"HTTP {status}", retry=True, wait=wait)
        if 300 <= status < 400:
            raise _Failed(f"HTTP {status}, a redirect (not followed)", retry=False)
        raise _Failed(f"HTTP {status}", retry=False)
