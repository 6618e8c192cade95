"""Push notifications end to end: configs through the real SDK client on both bindings and
both protocol versions, kept in the database across a restart; every state change POSTed
to a real webhook with its token and Authorization; slow and failing webhooks retried
without slowing the task, nor another webhook; configs capped per task and per caller;
webhook URLs that reach the hub's own network refused."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError
from cryptography.fernet import Fernet

from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import (
    get_task,
    send,
    submit,
    user_message,
    wait_for_state,
)
from tests.integration.conftest import TRANSPORTS, HubFactory
from tests.integration.test_metrics import scrape, value
from tests.servers.webhook import Received, Webhook


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    with Webhook() as running:
        yield running


def config(webhook: Webhook, task_id: str = "", name: str = "c1") -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        task_id=task_id,
        id=name,
        url=f"{webhook.url}/hook/{name}",
        token="tok-123",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="hook-secret"),
    )


def completed(webhook: Webhook, timeout: float = 60.0) -> list[Received]:
    """The requests up to the one that says the task completed (blocks: use a thread)."""
    deadline = time.monotonic() + timeout
    count = 1
    while True:
        received = webhook.wait_for(count, max(0.0, deadline - time.monotonic()))
        if "TASK_STATE_COMPLETED" in states(received):
            return received
        count = len(received) + 1


def _parts(value: object) -> list[dict[str, Any]]:
    """Every message part in a notification's body (1.0 ``parts``, v0.3 ``content``)."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("parts", "content") and isinstance(item, list):
                found += [part for part in item if isinstance(part, dict)]
            found += _parts(item)
    elif isinstance(value, list):
        for item in value:
            found += _parts(item)
    return found


def states(received: list[Received]) -> list[str]:
    found = []
    for request in received:
        body = request.body
        for key in ("task", "statusUpdate"):
            if key in body:
                found.append(body[key]["status"]["state"])
    return found


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_configs_and_notifications_on_every_binding(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook, transport: tuple[str, str]
) -> None:
    async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
        card = await hub.card("socrates")
        assert card.capabilities.push_notifications is True
        client = await hub.client("socrates", transport)
        request = user_message("Notify me.")
        request.configuration.task_push_notification_config.CopyFrom(config(webhook))
        request.configuration.return_immediately = True
        llm.script(Reply("Noted."))
        responses = [r async for r in client.send_message(request)]
        task_id = responses[0].task.id
        await wait_for_state(client, task_id, TaskState.TASK_STATE_COMPLETED)
        received = await asyncio.to_thread(completed, webhook)
        # Every change is sent: the task's start and its end (with 0.3 some notifications
        # are task snapshots, taken when sent, so their order is not the changes' order).
        assert {"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"} <= set(states(received))
        assert all(r.headers["x-a2a-notification-token"] == "tok-123" for r in received)
        first = received[0]
        assert first.path == "/hook/c1"
        assert first.headers["x-a2a-notification-token"] == "tok-123"
        assert first.headers["authorization"] == "Bearer hook-secret"
        # The answer's cost-v1 counts are JSON integers (a2a/sdk_fixes/numbers.py).
        costs = [
            part["data"]
            for r in received
            for part in _parts(r.body)
            if isinstance(part.get("data"), dict) and part["data"].get("kind") == "cost-v1"
        ]
        assert costs, [r.body for r in received]
        assert all(type(cost["llmCalls"]) is int for cost in costs), costs
        assert all(type(cost["usage"]["totalTokens"]) is int for cost in costs), costs

        second = await client.create_task_push_notification_config(config(webhook, task_id, "c2"))
        assert second.id == "c2"
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="c2")
        )
        assert got.url == f"{webhook.url}/hook/c2"
        can_list = transport != ("HTTP+JSON", "0.3")  # the SDK's 0.3 REST client cannot
        if can_list:
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert sorted(c.id for c in listed.configs) == ["c1", "c2"]
        if can_list:
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="c2")
            )
        else:  # the SDK's 0.3 REST client has no delete: the route, as 0.3 defines it
            path = f"/a2a/socrates/v1/tasks/{task_id}/pushNotificationConfigs/c2"
            v03 = {"A2A-Version": "0.3"}
            async with httpx.AsyncClient(base_url=hub.settings.base_url, headers=v03) as raw:
                deleted = await raw.delete(path)
                listed_03 = await raw.get(path.rsplit("/", 1)[0])
            assert deleted.status_code == 200, deleted.text
            assert listed_03.status_code == 200, listed_03.text
            ids = [c["pushNotificationConfig"]["id"] for c in listed_03.json()["configs"]]
            assert ids == ["c1"]  # (not a text search: a task id may hold "c2")
        with pytest.raises((A2AError, A2AClientError)):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="c2")
            )
        if can_list:
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task_id)
            )
            assert [c.id for c in listed.configs] == ["c1"]


async def test_configs_survive_a_restart(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook
) -> None:
    async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
        client = await hub.client("socrates")
        llm.script(Reply("Done."))
        task = await send(client, "Remember my hook.")
        await client.create_task_push_notification_config(config(webhook, task.id, "kept"))
    async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
        client = await hub.client("socrates")
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["kept"]


async def test_a_slow_or_failing_webhook_never_holds_the_task(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook
) -> None:
    webhook.hold()  # no notification is answered until the task's answer has come
    webhook.answers = [500, 503]  # the first two fail
    async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
        client = await hub.client("socrates")
        request = user_message("Slowly.")
        request.configuration.task_push_notification_config.CopyFrom(config(webhook))
        llm.script(Reply("Quickly."))
        async with asyncio.timeout(60):  # a hang guard: the webhook would hold it for ever
            responses = [r async for r in client.send_message(request)]
        assert responses[0].task.status.state == TaskState.TASK_STATE_COMPLETED
        assert webhook.answered == 0  # the task ended while the webhook had answered nothing
        webhook.release()
        received = await asyncio.to_thread(completed, webhook)
        # The first notification was tried three times (500, 503, then 200); the rest follow.
        assert [r.body for r in received[:3]] == [received[0].body] * 3
        assert "TASK_STATE_COMPLETED" in states(received)


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:8080/hook",
        "http://2130706433/hook",
        "http://user:pw@127.0.0.1/hook",
    ],
)
async def test_webhooks_on_the_hubs_own_network_are_refused(
    hub_factory: HubFactory, llm: FakeLLM, url: str
) -> None:
    async with hub_factory() as hub:  # no allow-list: loopback is refused too
        client = await hub.client("socrates")
        llm.script(Reply("Done."))
        task = await send(client, "Hook?")
        with pytest.raises((A2AError, A2AClientError)) as refused:
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id="bad", url=url)
            )
        # The reason is given (the SDK's own refusal names none), never the URL's path.
        reason = str(refused.value)
        assert re.search(r"Invalid push notification URL: .*(not a public|credentials)", reason)
        assert "/hook" not in reason
        assert "meta-data" not in reason
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert list(listed.configs) == []


async def test_loopback_is_refused_unless_allowed(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook
) -> None:
    async with hub_factory() as hub:
        client = await hub.client("socrates")
        llm.script(Hang())
        request = user_message("Hook?")
        request.configuration.return_immediately = True
        responses = [r async for r in client.send_message(request)]
        task_id = responses[0].task.id
        with pytest.raises((A2AError, A2AClientError)):
            await client.create_task_push_notification_config(config(webhook, task_id))
        assert (await get_task(client, task_id)).id == task_id
        assert webhook.received == []


async def test_a_redirect_is_not_followed(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.answers = [302] * 20  # every answer sends the hub elsewhere (127.0.0.1:9)
    async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
        client = await hub.client("socrates")
        request = user_message("Redirect me.")
        request.configuration.task_push_notification_config.CopyFrom(config(webhook))
        llm.script(Reply("Done."))
        responses = [r async for r in client.send_message(request)]
        assert responses[0].task.status.state == TaskState.TASK_STATE_COMPLETED
        await asyncio.to_thread(webhook.wait_for, 1)
    # The hub has stopped, its queue delivered. Each notification was tried once (a 3xx
    # is not retried) and never went elsewhere.
    sent = len(webhook.received)
    assert sent == caplog.text.count("a redirect, not followed")
    assert "retrying" not in caplog.text


@pytest.mark.parametrize("encrypted", [False, True])
async def test_configs_are_encrypted_in_the_database_with_a_key(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook, tmp_path: Path, encrypted: bool
) -> None:
    key = Fernet.generate_key().decode() if encrypted else None
    async with hub_factory(push_allowed_hosts="127.0.0.1", push_config_key=key) as hub:
        client = await hub.client("socrates")
        llm.script(Reply("Done."))
        task = await send(client, "Keep my secret.")
        await client.create_task_push_notification_config(config(webhook, task.id, "secret"))
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="secret")
        )
        assert got.authentication.credentials == "hook-secret"
    stored = b"".join(p.read_bytes() for p in (tmp_path / "data").glob("persona-agent.db*"))
    assert (b"hook-secret" in stored) is not encrypted
    assert (b"tok-123" in stored) is not encrypted


REFUSED = (A2AError, A2AClientError)


async def test_a_failing_webhook_never_delays_another_destination(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    with Webhook() as failing, Webhook() as healthy:
        failing.answers = [503] * 50
        failing.retry_after = "60"  # the hub waits before its next try (30 s at most)
        async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
            first = await hub.client("socrates")
            request = user_message("Tell my failing webhook.")
            request.configuration.task_push_notification_config.CopyFrom(config(failing))
            llm.script(Reply("For the first."))
            _ = [r async for r in first.send_message(request)]
            await asyncio.to_thread(failing.wait_for, 1)  # answered 503, Retry-After: 60

            second = await hub.client("socrates")  # another client, another task
            request = user_message("Tell my webhook.")
            request.configuration.task_push_notification_config.CopyFrom(config(healthy))
            llm.script(Reply("For the second."))
            _ = [r async for r in second.send_message(request)]
            # Its notifications come at once, not after the other webhook's wait.
            received = await asyncio.to_thread(completed, healthy, 5.0)
            assert "TASK_STATE_COMPLETED" in states(received)
            assert len(failing.received) == 1  # still waiting for its Retry-After


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_configs_per_task_are_capped(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook, transport: tuple[str, str]
) -> None:
    async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
        client = await hub.client("socrates", transport)
        llm.script(Hang())
        request = user_message("Hold on.")
        request.configuration.return_immediately = True
        # A config given with the message counts as one of the task's.
        request.configuration.task_push_notification_config.CopyFrom(config(webhook, name="c0"))
        responses = [r async for r in client.send_message(request)]
        task_id = responses[0].task.id

        refused_at, refusal = 0, ""
        for n in range(1, 2000):
            try:
                await client.create_task_push_notification_config(config(webhook, task_id, f"c{n}"))
            except REFUSED as error:
                refused_at, refusal = n, str(error)
                break
        assert refused_at == 10, "the 11th config of a task must be refused"
        rest_03 = transport == ("HTTP+JSON", "0.3")
        if rest_03:  # the SDK's 0.3 REST client drops the answer's body: read it raw
            refusal = await create_as_v03_rest(hub.settings.base_url, webhook, task_id, "c10")
        assert "PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_TASK=10" in refusal, refusal
        # Replacing a config (the same id) adds none.
        again = await client.create_task_push_notification_config(config(webhook, task_id, "c3"))
        assert again.id == "c3"
        # One more with a message to the task: refused as well, before the message is taken.
        follow_up = user_message("And tell this one.")
        follow_up.message.task_id = task_id
        follow_up.configuration.task_push_notification_config.CopyFrom(config(webhook, name="x"))
        named = None if rest_03 else "PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_TASK"
        with pytest.raises(REFUSED, match=named):
            _ = [r async for r in client.send_message(follow_up)]
        await client.cancel_task(CancelTaskRequest(id=task_id))
        await wait_for_state(client, task_id, TaskState.TASK_STATE_CANCELED)
    # The hub has stopped, its queues delivered: each event went to 10 webhooks at most,
    # the cancellation to each of the 10.
    received = webhook.received
    per_event = Counter(json.dumps(r.body, sort_keys=True) for r in received)
    assert max(per_event.values()) <= 10, max(per_event.values())
    canceled = {r.path for r in received if "TASK_STATE_CANCELED" in states([r])}
    assert canceled == {f"/hook/c{n}" for n in range(10)}


async def create_as_v03_rest(base_url: str, webhook: Webhook, task_id: str, name: str) -> str:
    """The answer to a v0.3 HTTP+JSON CreateTaskPushNotificationConfig, which must be 400."""
    body = {
        "parent": f"tasks/{task_id}",
        "config_id": name,
        "config": {"push_notification_config": {"id": name, "url": f"{webhook.url}/hook/{name}"}},
    }
    path = f"/a2a/socrates/v1/tasks/{task_id}/pushNotificationConfigs"
    async with httpx.AsyncClient(base_url=base_url, headers={"A2A-Version": "0.3"}) as raw:
        response = await raw.post(path, json=body)
    assert response.status_code == 400, response.text
    return response.text


ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"


async def test_configs_per_caller_are_capped_across_their_tasks(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook
) -> None:
    async with (
        hub_factory(
            push_allowed_hosts="127.0.0.1",
            api_keys=f"{ALICE},{BOB}",
            push_max_configs_per_caller=3,
        ) as hub,
        httpx.AsyncClient(
            base_url=hub.settings.base_url, headers={"Authorization": f"Bearer {ALICE}"}
        ) as alice_http,
        httpx.AsyncClient(
            base_url=hub.settings.base_url, headers={"Authorization": f"Bearer {BOB}"}
        ) as bob_http,
    ):
        alice = await hub.client("socrates", http=alice_http)
        bob = await hub.client("socrates", http=bob_http)
        llm.script(*[Hang() for _ in range(5)])
        tasks = [await submit(alice, f"Task {n}.") for n in range(4)]
        for n, task_id in enumerate(tasks[:3]):
            await alice.create_task_push_notification_config(config(webhook, task_id, f"a{n}"))
        with pytest.raises(REFUSED, match="PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER=3"):
            await alice.create_task_push_notification_config(config(webhook, tasks[3], "a3"))
        # A config with a message counts the same: refused, and no task is started.
        request = user_message("Notify me.")
        request.configuration.task_push_notification_config.CopyFrom(config(webhook))
        with pytest.raises(REFUSED, match="PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER"):
            _ = [r async for r in alice.send_message(request)]
        # Another caller has places of its own.
        bob_task = await submit(bob, "Bob's task.")
        await bob.create_task_push_notification_config(config(webhook, bob_task, "b0"))
        # A finished task's configs count no more (once its end is stored).
        await alice.cancel_task(CancelTaskRequest(id=tasks[0]))
        async with asyncio.timeout(60):
            while True:
                try:
                    await alice.create_task_push_notification_config(
                        config(webhook, tasks[3], "a3")
                    )
                    break
                except REFUSED:
                    await asyncio.sleep(0.05)
        for task_id in [*tasks[1:], bob_task]:
            client = bob if task_id == bob_task else alice
            await client.cancel_task(CancelTaskRequest(id=task_id))


async def test_a_full_destination_queue_drops_and_counts(
    hub_factory: HubFactory, llm: FakeLLM, webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    webhook.hold()  # the first notification is not answered: the next ones queue
    async with hub_factory(push_allowed_hosts="127.0.0.1", push_queue_per_destination=1) as hub:
        client = await hub.client("socrates")
        request = user_message("Many events, one slow webhook.")
        request.configuration.task_push_notification_config.CopyFrom(config(webhook))
        llm.script(Reply("Done."))
        _ = [r async for r in client.send_message(request)]
        # The first is being delivered, the next waits: the others are dropped.
        async with asyncio.timeout(60):  # as a monitoring system would see it: /metrics
            while not value(await scrape(hub), DELIVERIES, outcome="dropped"):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        assert "PERSONA_AGENT_PUSH_QUEUE_PER_DESTINATION" in caplog.text
        webhook.release()


DELIVERIES = "persona_agent_push_notifications_total"
