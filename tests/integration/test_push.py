"""Push notifications end to end: configs through the real SDK client on both bindings and
both protocol versions, kept in the database across a restart; every state change POSTed
to a real webhook with its token and Authorization; slow and failing webhooks retried
without slowing the task; webhook URLs that reach the hub's own network refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError
from cryptography.fernet import Fernet

from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import get_task, send, user_message, wait_for_state
from tests.integration.conftest import TRANSPORTS, HubFactory
from tests.servers.webhook import Received, Webhook


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


def completed(webhook: Webhook) -> list[Received]:
    """The requests up to the one that says the task completed (blocks: use a thread)."""
    count = 1
    while True:
        received = webhook.wait_for(count)
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
    webhook.delay = 3.0  # each notification takes 3 s to be answered
    webhook.answers = [500, 503]  # the first two fail
    async with hub_factory(push_allowed_hosts="127.0.0.1") as hub:
        client = await hub.client("socrates")
        request = user_message("Slowly.")
        request.configuration.task_push_notification_config.CopyFrom(config(webhook))
        llm.script(Reply("Quickly."))
        async with asyncio.timeout(2.5):  # less than one webhook answer: not waited for
            responses = [r async for r in client.send_message(request)]
        assert responses[0].task.status.state == TaskState.TASK_STATE_COMPLETED
        webhook.delay = 0
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
        with pytest.raises((A2AError, A2AClientError), match="Invalid push notification URL"):
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id="bad", url=url)
            )
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
