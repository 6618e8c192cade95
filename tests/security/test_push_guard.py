"""The push-notification guard and sender (``persona_agent.a2a.push``): SSRF refusals, the
local-development allow-list, and delivery to a real webhook server (uvicorn on
127.0.0.1) off the task, with retries, no redirects, in order. No test resolves a real
name: the event loop's resolver is the test's."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.server.context import ServerCallContext
from a2a.server.tasks.inmemory_push_notification_config_store import (
    InMemoryPushNotificationConfigStore,
)
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from persona_agent.a2a.push import PushUrlGuard, RetryingPushSender

ANSWERS = {
    "internal.example": ["10.1.2.3"],
    "public.example": ["93.184.216.34"],
}


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names resolve as ANSWERS say, ``localhost`` as the hosts file says, numeric forms
    as the system reads them (decimal, octal, hex): never over the network."""
    real = socket.getaddrinfo

    async def getaddrinfo(
        self: asyncio.AbstractEventLoop, host: Any, port: Any, *args: Any, **kwargs: Any
    ) -> list[Any]:
        if host in ANSWERS:
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port or 80))
                for address in ANSWERS[host]
            ]
        if host == "localhost":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port or 80)),
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port or 80, 0, 0)),
            ]
        return real(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)

    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", getaddrinfo)


# ----------------------------------------------------------------------------- the guard


@pytest.mark.usefixtures("resolver")
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost/",
        "http://[::1]/",
        "http://10.0.0.5/",
        "http://192.168.1.1/",
        "http://172.16.0.1/",
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/",
        "http://224.0.0.1/",
        "http://0.0.0.0/",
        "http://100.64.0.1/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.0.0.1/",
        "ftp://example.com/",
        "http://user:pw@example.com/",
        "http://user:pw@public.example/",
        "http://internal.example/hook",
        "http:///hook",
        "http://public.example/" + "a" * 2048,
    ],
)
async def test_the_guard_refuses(url: str) -> None:
    assert await PushUrlGuard()(url) is False


@pytest.mark.usefixtures("resolver")
async def test_a_public_name_is_accepted() -> None:
    assert await PushUrlGuard()("https://public.example/hook?x=1") is True


@pytest.mark.usefixtures("resolver")
async def test_the_allow_list() -> None:
    assert await PushUrlGuard(["127.0.0.1"])("http://127.0.0.1:9999/hook") is True
    only_port = PushUrlGuard(["127.0.0.1:9999"])
    assert await only_port("http://127.0.0.1:9999/hook") is True
    assert await only_port("http://127.0.0.1:9998/hook") is False
    assert await only_port("http://127.0.0.1/hook") is False
    assert await PushUrlGuard(["127.0.0.1"])("http://127.0.0.2/") is False
    assert await PushUrlGuard(["[::1]"])("http://[::1]:8080/hook") is True
    assert await PushUrlGuard(["LocalHost"])("https://localhost/hook") is True
    # Listed hosts still need http(s) and no credentials.
    assert await PushUrlGuard(["127.0.0.1"])("ftp://127.0.0.1/") is False
    assert await PushUrlGuard(["127.0.0.1"])("http://u:p@127.0.0.1/") is False


@pytest.mark.usefixtures("resolver")
async def test_a_refusal_logs_neither_path_query_nor_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert await PushUrlGuard()("http://10.0.0.1:8080/hook/s3cret-path?token=s3cret") is False
    assert await PushUrlGuard()("http://user:s3cret@public.example/x") is False
    assert "s3cret" not in caplog.text
    assert "http://10.0.0.1:8080" in caplog.text


# ------------------------------------------------------------------ a real webhook server


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Webhook:
    """An ASGI webhook that records every request and answers as scripted per path:
    ``answers[path]`` is a list of status codes popped one per request (then 200);
    ``/slow`` waits for :attr:`release`; ``/redirect`` answers 302 to ``/target``."""

    port: int = 0
    hits: list[Hit] = field(default_factory=list)
    answers: dict[str, list[int]] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def on(self, path: str) -> list[Hit]:
        return [hit for hit in self.hits if hit.path == path]

    async def wait_for(self, path: str, count: int) -> list[Hit]:
        """The hits on ``path`` once there are ``count`` of them (10 seconds at most)."""
        async with asyncio.timeout(10), self.changed:
            await self.changed.wait_for(lambda: len(self.on(path)) >= count)
        return self.on(path)

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        assert scope["type"] == "http"
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        path = scope["path"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        async with self.changed:
            self.hits.append(Hit(path, headers, json.loads(raw) if raw else {}))
            self.changed.notify_all()
        extra: list[tuple[bytes, bytes]] = []
        status = 200
        if path == "/slow":
            self.arrived.set()
            await self.release.wait()
        elif path == "/redirect":
            status = 302
            extra.append((b"location", self.url("/target").encode()))
        elif self.answers.get(path):
            status = self.answers[path].pop(0)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-length", b"0"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hook = Webhook()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    hook.port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(hook, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not server.started:
                assert not serving.done(), "uvicorn stopped during start-up"
                await asyncio.sleep(0.01)
        yield hook
    finally:
        hook.release.set()
        server.should_exit = True
        async with asyncio.timeout(10):
            await serving
        sock.close()


@dataclass
class Setup:
    sender: RetryingPushSender
    store: InMemoryPushNotificationConfigStore

    async def hook(self, task_id: str, url: str) -> None:
        config = TaskPushNotificationConfig(
            id=f"config-{task_id}",
            task_id=task_id,
            url=url,
            token="tok",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="secret"),
        )
        await self.store.set_info(task_id, config, ServerCallContext())


@pytest.fixture
async def setup(webhook: Webhook) -> AsyncIterator[Setup]:
    store = InMemoryPushNotificationConfigStore()
    async with httpx.AsyncClient() as client:
        sender = RetryingPushSender(
            client,
            store,
            push_url_validator=PushUrlGuard([f"127.0.0.1:{webhook.port}"]),
            first_delay=0.01,
            max_delay=0.05,
            timeout=5.0,
        )
        try:
            yield Setup(sender, store)
        finally:
            await sender.aclose(grace=1.0)


def status_event(task_id: str, seq: int = 0) -> TaskStatusUpdateEvent:
    event = TaskStatusUpdateEvent(
        task_id=task_id,
        context_id="ctx",
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
    )
    event.metadata.update({"seq": seq})
    return event


def seq_of(hit: Hit) -> int:
    return int(hit.body["statusUpdate"]["metadata"]["seq"])


async def test_send_returns_before_the_webhook_answers(setup: Setup, webhook: Webhook) -> None:
    await setup.hook("t1", webhook.url("/slow"))
    async with asyncio.timeout(2):
        await setup.sender.send_notification("t1", status_event("t1"))
    # Returned while nothing had even reached the webhook, which then holds the POST.
    assert not webhook.arrived.is_set()
    async with asyncio.timeout(10):
        await webhook.arrived.wait()
    webhook.release.set()


async def test_delivered_with_the_sdk_headers_and_body(setup: Setup, webhook: Webhook) -> None:
    await setup.hook("t1", webhook.url("/ok"))
    await setup.sender.send_notification("t1", status_event("t1", 7))
    [hit] = await webhook.wait_for("/ok", 1)
    assert hit.headers["x-a2a-notification-token"] == "tok"
    assert hit.headers["authorization"] == "Bearer secret"
    assert hit.body["statusUpdate"]["taskId"] == "t1"
    assert seq_of(hit) == 7


async def test_5xx_is_retried_until_it_succeeds(setup: Setup, webhook: Webhook) -> None:
    webhook.answers["/flaky"] = [500, 503]
    await setup.hook("t1", webhook.url("/flaky"))
    await setup.sender.send_notification("t1", status_event("t1"))
    await webhook.wait_for("/flaky", 3)
    await setup.sender.aclose(grace=1.0)
    assert len(webhook.on("/flaky")) == 3


async def test_429_is_retried(setup: Setup, webhook: Webhook) -> None:
    webhook.answers["/busy"] = [429]
    await setup.hook("t1", webhook.url("/busy"))
    await setup.sender.send_notification("t1", status_event("t1"))
    await webhook.wait_for("/busy", 2)


async def test_retries_stop_after_attempts(setup: Setup, webhook: Webhook) -> None:
    webhook.answers["/down"] = [500] * 10
    await setup.hook("t1", webhook.url("/down"))
    await setup.sender.send_notification("t1", status_event("t1"))
    await webhook.wait_for("/down", setup.sender.attempts)
    await setup.sender.aclose(grace=2.0)
    assert len(webhook.on("/down")) == setup.sender.attempts


async def test_400_is_tried_once(setup: Setup, webhook: Webhook) -> None:
    webhook.answers["/bad"] = [400, 400, 400]
    await setup.hook("t1", webhook.url("/bad"))
    await setup.hook("t2", webhook.url("/ok"))
    await setup.sender.send_notification("t1", status_event("t1"))
    await setup.sender.send_notification("t2", status_event("t2"))
    # One worker, in order: once t2's notification arrived, t1's is settled.
    await webhook.wait_for("/ok", 1)
    assert len(webhook.on("/bad")) == 1


async def test_a_redirect_is_not_followed(setup: Setup, webhook: Webhook) -> None:
    await setup.hook("t1", webhook.url("/redirect"))
    await setup.hook("t2", webhook.url("/ok"))
    await setup.sender.send_notification("t1", status_event("t1"))
    await setup.sender.send_notification("t2", status_event("t2"))
    await webhook.wait_for("/ok", 1)
    assert len(webhook.on("/redirect")) == 1
    assert webhook.on("/target") == []


async def test_a_refused_url_gets_no_request(
    setup: Setup, webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    # Same server, but a port form the allow-list does not hold: the guard's address
    # check refuses loopback, so nothing is sent.
    await setup.hook("t1", f"http://localhost:{webhook.port}/refused?token=s3cret")
    await setup.hook("t2", webhook.url("/ok"))
    await setup.sender.send_notification("t1", status_event("t1"))
    await setup.sender.send_notification("t2", status_event("t2"))
    await webhook.wait_for("/ok", 1)
    assert webhook.on("/refused") == []
    assert "s3cret" not in caplog.text
    assert "secret" not in caplog.text.replace("s3cret", "")


async def test_notifications_of_a_task_arrive_in_order(setup: Setup, webhook: Webhook) -> None:
    webhook.answers["/ordered"] = [500]  # the first is retried: the rest must wait for it
    await setup.hook("t1", webhook.url("/ordered"))
    for seq in range(10):
        await setup.sender.send_notification("t1", status_event("t1", seq))
    hits = await webhook.wait_for("/ordered", 11)
    assert [seq_of(hit) for hit in hits] == [0, *range(10)]


async def test_a_full_queue_drops_without_blocking(
    webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    store = InMemoryPushNotificationConfigStore()
    async with httpx.AsyncClient() as client:
        sender = RetryingPushSender(
            client,
            store,
            push_url_validator=PushUrlGuard([f"127.0.0.1:{webhook.port}"]),
            max_pending=2,
        )
        config = TaskPushNotificationConfig(id="c", task_id="t1", url=webhook.url("/slow"))
        await store.set_info("t1", config, ServerCallContext())
        await sender.send_notification("t1", status_event("t1", 0))
        async with asyncio.timeout(10):
            await webhook.arrived.wait()  # the worker holds the first; two may wait
        async with asyncio.timeout(2):
            for seq in range(1, 5):
                await sender.send_notification("t1", status_event("t1", seq))
        assert sender.pending == 2
        assert "dropped" in caplog.text
        webhook.release.set()
        await sender.aclose(grace=5.0)
    assert [seq_of(hit) for hit in webhook.on("/slow")] == [0, 1, 2]


async def test_aclose_stops_the_worker(setup: Setup, webhook: Webhook) -> None:
    await setup.hook("t1", webhook.url("/ok"))
    await setup.sender.send_notification("t1", status_event("t1"))
    assert setup.sender.running
    await setup.sender.aclose(grace=5.0)
    assert not setup.sender.running
    # The queued notification was delivered within the grace period.
    assert len(webhook.on("/ok")) == 1


async def test_aclose_gives_up_after_the_grace_period(setup: Setup, webhook: Webhook) -> None:
    await setup.hook("t1", webhook.url("/slow"))
    await setup.sender.send_notification("t1", status_event("t1"))
    async with asyncio.timeout(10):
        await webhook.arrived.wait()
        await setup.sender.aclose(grace=0.05)  # the webhook never answers: cancelled
    assert not setup.sender.running
