"""The push sender's delivery per destination, with real webhooks on 127.0.0.1 and the
SDK's in-memory config store: one failing destination never delays another, each is
delivered in order, every queue is bounded (a drop is logged and counted) and an idle
destination's worker stops."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.auth.user import UnauthenticatedUser
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryPushNotificationConfigStore
from a2a.types.a2a_pb2 import (
    Artifact,
    Part,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
)
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from persona_agent.a2a.tasks.push import (
    DeliveryLimits,
    PushUrlGuard,
    Retries,
    RetryingPushSender,
)
from persona_agent.observe.metrics import NO_METRICS, HubMetrics
from tests.servers.webhook import Received, Webhook

CONTEXT = ServerCallContext(user=UnauthenticatedUser())


@pytest.fixture
def webhooks() -> Iterator[tuple[Webhook, Webhook]]:
    with Webhook() as first, Webhook() as second:
        yield first, second


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=60) as client:
        yield client


async def sender_for(
    http: httpx.AsyncClient,
    hooks: dict[str, Webhook],
    limits: DeliveryLimits | None = None,
    metrics: HubMetrics = NO_METRICS,
) -> RetryingPushSender:
    """A sender whose task ``{name}`` notifies webhook ``hooks[name]``."""
    store = InMemoryPushNotificationConfigStore()
    for name, hook in hooks.items():
        config = TaskPushNotificationConfig(task_id=name, id=name, url=f"{hook.url}/{name}")
        await store.set_info(name, config, CONTEXT)
    return RetryingPushSender(
        http,
        store,
        push_url_validator=PushUrlGuard(["127.0.0.1"]),
        retries=Retries(attempts=3, first_delay=0.05, max_delay=30.0),
        limits=limits,
        metrics=metrics,
    )


def event(task_id: str, n: int) -> TaskArtifactUpdateEvent:
    artifact = Artifact(artifact_id="answer", parts=[Part(text=str(n))])
    return TaskArtifactUpdateEvent(task_id=task_id, context_id="ctx", artifact=artifact)


def numbers(received: list[Received]) -> list[int]:
    return [int(r.body["artifactUpdate"]["artifact"]["parts"][0]["text"]) for r in received]


def outcome(metrics: HubMetrics, name: str) -> float:
    total = "persona_agent_push_notifications_total"
    return metrics.registry.get_sample_value(total, {"outcome": name}) or 0.0


async def test_a_failing_destination_never_delays_another(
    http: httpx.AsyncClient, webhooks: tuple[Webhook, Webhook]
) -> None:
    failing, healthy = webhooks
    failing.answers = [503] * 10
    failing.retry_after = "60"
    sender = await sender_for(http, {"a": failing, "b": healthy})
    await sender.send_notification("a", event("a", 0))
    await asyncio.to_thread(failing.wait_for, 1)  # now waiting 30 s to try again
    for n in range(5):
        await sender.send_notification("b", event("b", n))
    received = await asyncio.to_thread(healthy.wait_for, 5)
    assert numbers(received) == [0, 1, 2, 3, 4]  # in order,
    assert len(failing.received) == 1  # while the other still waits to try again
    assert sender.destinations == 2
    await sender.aclose(grace=0.1)
    assert sender.destinations == 0


async def test_each_destination_is_delivered_in_order_through_retries(
    http: httpx.AsyncClient, webhooks: tuple[Webhook, Webhook]
) -> None:
    hook = webhooks[0]
    hook.answers = [500, 200, 503]  # the first and the second notification fail once
    sender = await sender_for(http, {"a": hook})
    for n in range(4):
        await sender.send_notification("a", event("a", n))
    received = await asyncio.to_thread(hook.wait_for, 6)
    assert numbers(received) == [0, 0, 1, 1, 2, 3]
    await sender.aclose()


async def test_a_full_destination_queue_drops_and_counts(
    http: httpx.AsyncClient, webhooks: tuple[Webhook, Webhook], caplog: pytest.LogCaptureFixture
) -> None:
    hook = webhooks[0]
    hook.hold()  # nothing is answered until all ten are sent
    metrics = HubMetrics()
    sender = await sender_for(http, {"a": hook}, DeliveryLimits(per_destination=2), metrics)
    for n in range(10):
        await sender.send_notification("a", event("a", n))
    hook.release()
    await sender.aclose()  # what was queued is delivered first
    # One in flight and two queued at most: the others were dropped.
    delivered = outcome(metrics, "delivered")
    assert 1 <= delivered <= 3
    assert delivered + outcome(metrics, "dropped") == 10
    assert numbers(hook.received) == sorted(numbers(hook.received))
    assert "PERSONA_AGENT_PUSH_QUEUE_PER_DESTINATION" in caplog.text


async def test_destinations_at_once_are_bounded(
    http: httpx.AsyncClient, webhooks: tuple[Webhook, Webhook], caplog: pytest.LogCaptureFixture
) -> None:
    busy, other = webhooks
    busy.hold()  # its worker stays busy until the end
    metrics = HubMetrics()
    sender = await sender_for(
        http, {"a": busy, "b": other}, DeliveryLimits(destinations=1), metrics
    )
    await sender.send_notification("a", event("a", 0))
    await asyncio.to_thread(busy.wait_for, 1)  # its worker is busy
    await sender.send_notification("b", event("b", 0))
    busy.release()
    await sender.aclose()
    assert (outcome(metrics, "delivered"), outcome(metrics, "dropped")) == (1, 1)
    assert other.received == []
    assert "PERSONA_AGENT_PUSH_MAX_DESTINATIONS" in caplog.text


async def test_queued_bytes_are_bounded(
    http: httpx.AsyncClient, webhooks: tuple[Webhook, Webhook], caplog: pytest.LogCaptureFixture
) -> None:
    hook = webhooks[0]
    hook.hold()  # nothing is answered until all ten are sent
    metrics = HubMetrics()
    size = len(json.dumps(MessageToDict(to_stream_response(event("a", 0))), separators=(",", ":")))
    limits = DeliveryLimits(queued_bytes=3 * size)  # three bodies, though 100 could queue
    sender = await sender_for(http, {"a": hook}, limits, metrics)
    for n in range(10):
        await sender.send_notification("a", event("a", n))
    hook.release()
    await sender.aclose()
    delivered = outcome(metrics, "delivered")
    assert 1 <= delivered <= 3
    assert delivered + outcome(metrics, "dropped") == 10
    assert "PERSONA_AGENT_PUSH_QUEUE_BYTES" in caplog.text


async def test_an_idle_destinations_worker_stops(
    http: httpx.AsyncClient, webhooks: tuple[Webhook, Webhook]
) -> None:
    hook = webhooks[0]
    sender = await sender_for(http, {"a": hook}, DeliveryLimits(idle_seconds=0.1))
    await sender.send_notification("a", event("a", 0))
    await asyncio.to_thread(hook.wait_for, 1)
    assert sender.destinations == 1
    async with asyncio.timeout(60):
        # A bounded wait for the idle timeout itself: there is no event to wait on.
        while sender.destinations:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    await sender.send_notification("a", event("a", 1))  # a new worker, on demand
    assert numbers(await asyncio.to_thread(hook.wait_for, 2)) == [0, 1]
    await sender.aclose()
