"""Two replicas of the hub on one PostgreSQL, each a real uvicorn in this process with its
own engine, listening connection and lease: tasks, conversations and personas are the
hub's, not a replica's. (Processes, nginx, SIGKILL: tests/deployment/test_nginx_replicas.py.)"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import A2AError
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from persona_agent.cluster.tasks import replicas_table
from persona_agent.db import create_engine
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import (
    answer_text,
    get_task,
    send,
    submit,
    user_message,
    wait_for_state,
)
from tests.integration.conftest import Hub, HubFactory
from tests.integration.test_push import completed, states
from tests.servers.webhook import Webhook

REFUSED = (A2AError, A2AClientError)
WAIT = 60.0
"""Seconds a test waits at most for what must happen between replicas: a safety bound
against a hang, not a timing (how soon: bench/replicas.py)."""


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


@pytest.fixture
async def pair(hub_factory: HubFactory, pg_migrated_url: str) -> AsyncIterator[tuple[Hub, Hub]]:
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(hub_factory(database_url=pg_migrated_url))
        b = await stack.enter_async_context(hub_factory(database_url=pg_migrated_url))
        yield a, b


async def _card_status(hub: Hub, persona_id: str, status: int) -> None:
    """Wait until the persona's card answers ``status`` (at most :data:`WAIT`)."""
    url = f"/a2a/{persona_id}/.well-known/agent-card.json"
    try:
        async with asyncio.timeout(WAIT):
            while (await hub.http.get(url)).status_code != status:  # noqa: ASYNC110 (HTTP)
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"{url} did not answer {status} within {WAIT:g} s") from None


def _text(events: list[StreamResponse]) -> str:
    return "".join(
        part.text
        for event in events
        if event.HasField("artifact_update")
        for part in event.artifact_update.artifact.parts
    )


async def test_a_task_started_on_one_replica_is_read_listed_and_followed_on_the_other(
    pair: tuple[Hub, Hub], llm: FakeLLM
) -> None:
    a, b = pair
    words = [f"w{i} " for i in range(30)]
    llm.script(Reply("".join(words), chunks=words, token_delay=0.05, hold_after=5))
    on_a = await a.client("socrates")
    task_id = await submit(on_a, "Talk a while")
    await asyncio.to_thread(llm.wait_held)  # five words written, the rest held
    on_b = await b.client("socrates", streaming=True)
    seen = await get_task(on_b, task_id)
    assert seen.status.state == TaskState.TASK_STATE_WORKING
    listed = await on_b.list_tasks(ListTasksRequest())
    assert task_id in [task.id for task in listed.tasks]

    events: list[StreamResponse] = []
    async with asyncio.timeout(WAIT):
        async for event in on_b.subscribe(SubscribeToTaskRequest(id=task_id)):
            events.append(event)
            llm.release()  # once subscribed: the rest of the answer follows live
    first = events[0]
    assert first.HasField("task")
    # The snapshot and the events after it add up to the whole answer: no gap, no repeat.
    before = "".join(p.text for art in first.task.artifacts for p in art.parts)
    assert before + _text(events[1:]) == "".join(words)
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    done = await get_task(on_b, task_id)
    assert answer_text(done) == "".join(words)


async def test_cancel_through_the_other_replica_stops_the_model(
    pair: tuple[Hub, Hub], llm: FakeLLM
) -> None:
    a, b = pair
    llm.script(Hang())
    streaming = await a.client("socrates", streaming=True)
    events: list[StreamResponse] = []

    async def follow() -> None:
        async for event in streaming.send_message(user_message("Hello?")):
            events.append(event)

    follower = asyncio.create_task(follow())
    await asyncio.to_thread(llm.wait_requests, 1)
    async with asyncio.timeout(WAIT):  # the first event may still be on its way to the client
        while not events:  # noqa: ASYNC110 (the SDK client's stream, read by its task)
            await asyncio.sleep(0.01)
    task_id = events[0].task.id
    on_b = await b.client("socrates")
    canceled = await on_b.cancel_task(CancelTaskRequest(id=task_id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    # Replica A hears of it and closes its model call (an event between replicas, how
    # soon: bench/replicas.py).
    await asyncio.to_thread(llm.wait_disconnect)
    # The client streaming from replica A hears the end.
    async with asyncio.timeout(WAIT):
        await follower
    last = events[-1]
    state = last.task.status.state if last.HasField("task") else last.status_update.status.state
    assert state == TaskState.TASK_STATE_CANCELED
    stored = await get_task(await a.client("socrates"), task_id)
    assert stored.status.state == TaskState.TASK_STATE_CANCELED


async def test_a_conversation_continues_on_the_other_replica(
    pair: tuple[Hub, Hub], llm: FakeLLM
) -> None:
    a, b = pair
    llm.script(Reply("First answer."), Reply("Second answer."))
    first = await send(await a.client("socrates"), "First question")
    second = await send(await b.client("socrates"), "Second question", first.context_id)
    assert answer_text(second) == "Second answer."
    # Replica B's model call carried the turn replica A answered.
    contents = [m.get("content") for m in llm.requests[1]["messages"]]
    assert "First question" in contents
    assert "First answer." in contents


async def test_turns_of_one_conversation_on_two_replicas_run_one_at_a_time(
    pair: tuple[Hub, Hub], llm: FakeLLM
) -> None:
    a, b = pair
    llm.script(Reply("Opening."))
    opening = await send(await a.client("socrates"), "Open")
    context = opening.context_id
    llm.script(Reply("Slow one.", token_delay=0.2), Reply("Quick one."))
    results = await asyncio.gather(
        send(await a.client("socrates"), "From A", context),
        send(await b.client("socrates"), "From B", context),
    )
    assert {r.status.state for r in results} == {TaskState.TASK_STATE_COMPLETED}
    # The second model call saw the first turn whole: they did not interleave.
    later = llm.requests[2]["messages"]
    contents = [m.get("content") for m in later]
    assert "Slow one." in contents


async def test_a_persona_written_on_one_replica_is_served_by_the_other(
    pair: tuple[Hub, Hub],
) -> None:
    a, b = pair
    persona = {"name": "Ada Lovelace", "description": "The first programmer."}
    created = await a.http.post("/api/v1/personas", json={"id": "ada", **persona})
    assert created.status_code == 201, created.text
    await _card_status(b, "ada", 200)
    # ETags hold across replicas: two writers with the same one, one wins.
    etag = created.headers["etag"]
    changed = {**persona, "description": "Analyst of engines."}
    first, second = await asyncio.gather(
        a.http.put("/api/v1/personas/ada", json=changed, headers={"If-Match": etag}),
        b.http.put(
            "/api/v1/personas/ada",
            json={**persona, "description": "Poet of numbers."},
            headers={"If-Match": etag},
        ),
    )
    assert sorted([first.status_code, second.status_code]) == [200, 412]
    deleted = await b.http.delete("/api/v1/personas/ada")
    assert deleted.status_code == 204
    await _card_status(a, "ada", 404)


async def test_readyz_reports_the_database(pair: tuple[Hub, Hub]) -> None:
    a, b = pair
    ready_a = (await a.http.get("/readyz")).json()
    ready_b = (await b.http.get("/readyz")).json()
    assert ready_a["status"] == ready_b["status"] == "ready"
    assert ready_a["replica"] != ready_b["replica"]


async def test_each_replica_names_itself_in_its_metrics(pair: tuple[Hub, Hub]) -> None:
    for hub in pair:
        replica = (await hub.http.get("/readyz")).json()["replica"]
        metrics = await hub.http.get("/metrics")
        (info,) = [
            sample
            for family in text_string_to_metric_families(metrics.text)
            for sample in family.samples
            if sample.name == "persona_agent_info"
        ]
        assert info.labels["replica"] == replica


async def test_a_replica_that_starts_leaves_the_others_tasks_alone(
    pair: tuple[Hub, Hub], hub_factory: HubFactory, pg_migrated_url: str, llm: FakeLLM
) -> None:
    a, _b = pair
    # Held by the model until a third replica has started, however long that takes.
    llm.script(Reply("Slowly. " * 60, hold_after=2))
    client = await a.client("socrates")
    task_id = await submit(client, "Go on")
    await asyncio.to_thread(llm.wait_held)
    async with hub_factory(database_url=pg_migrated_url) as c:
        on_c = await c.client("socrates")
        assert (await get_task(on_c, task_id)).status.state == TaskState.TASK_STATE_WORKING
    llm.release()
    done = await wait_for_state(client, task_id, TaskState.TASK_STATE_COMPLETED)
    assert answer_text(done) == "Slowly. " * 60


async def test_a_replica_that_stops_gracefully_finishes_or_cancels_its_tasks_and_leaves(
    hub_factory: HubFactory, pg_migrated_url: str, llm: FakeLLM
) -> None:
    llm.script(Reply("Nearly done now.", token_delay=0.2), Hang())
    async with hub_factory(database_url=pg_migrated_url) as a:
        # A grace period the 0.8 s answer fits in many times over on a busy machine (the
        # hanging call waits it out: the model's timeout is longer).
        grace = {"shutdown_grace_seconds": 5, "llm_timeout": 60}
        async with hub_factory(database_url=pg_migrated_url, **grace) as b:
            on_b = await b.client("socrates")
            finishing = await submit(on_b, "Finish this")
            await asyncio.to_thread(llm.wait_requests, 1)
            hanging = await submit(on_b, "And this")
            await asyncio.to_thread(llm.wait_requests, 2)
            leaving = (await b.http.get("/readyz")).json()["replica"]
        # B stopped as on SIGTERM: what it could finish in its grace period it finished,
        # the rest it canceled; nothing is left for a lease to fail.
        on_a = await a.client("socrates")
        assert (await get_task(on_a, finishing)).status.state == TaskState.TASK_STATE_COMPLETED
        assert (await get_task(on_a, hanging)).status.state == TaskState.TASK_STATE_CANCELED
        database = create_engine(pg_migrated_url)
        async with database.connect() as conn:
            replicas = [row[0] for row in await conn.execute(select(replicas_table.c.id))]
        await database.dispose()
        assert leaving not in replicas
        assert replicas == [(await a.http.get("/readyz")).json()["replica"]]


async def test_a_push_config_set_through_one_replica_is_served_by_the_one_running_the_task(
    hub_factory: HubFactory, pg_migrated_url: str, llm: FakeLLM
) -> None:
    words = [f"w{i} " for i in range(20)]
    llm.script(Reply("".join(words), chunks=words, token_delay=0.05, hold_after=2))
    with Webhook() as webhook:
        async with (
            hub_factory(database_url=pg_migrated_url, push_allowed_hosts="127.0.0.1") as a,
            hub_factory(database_url=pg_migrated_url, push_allowed_hosts="127.0.0.1") as b,
        ):
            task_id = await submit(await a.client("socrates"), "Talk a while")
            await asyncio.to_thread(llm.wait_held)  # the task runs until released
            # The config goes in through B; A, which runs the task, must hear of it.
            on_b = await b.client("socrates")
            await on_b.create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=task_id, id="hook", url=f"{webhook.url}/hook", token="tok"
                )
            )
            llm.release()
            await wait_for_state(on_b, task_id, TaskState.TASK_STATE_COMPLETED)
            received = await asyncio.to_thread(completed, webhook)
    assert all(r.headers.get("x-a2a-notification-token") == "tok" for r in received)
    assert states(received)[-1] == "TASK_STATE_COMPLETED"


async def test_push_config_caps_count_every_replicas_configs(
    hub_factory: HubFactory, pg_migrated_url: str, llm: FakeLLM
) -> None:
    caps = {"push_max_configs_per_task": 2, "push_max_configs_per_caller": 3}
    with Webhook() as webhook:
        async with (
            hub_factory(database_url=pg_migrated_url, push_allowed_hosts="127.0.0.1", **caps) as a,
            hub_factory(database_url=pg_migrated_url, push_allowed_hosts="127.0.0.1", **caps) as b,
        ):
            on_a, on_b = await a.client("socrates"), await b.client("socrates")
            llm.script(Hang(), Hang())
            first, second = [await submit(on_a, f"Task {n}.") for n in range(2)]

            def hook(task_id: str, name: str) -> TaskPushNotificationConfig:
                return TaskPushNotificationConfig(
                    task_id=task_id, id=name, url=f"{webhook.url}/{name}"
                )

            await on_a.create_task_push_notification_config(hook(first, "a"))
            await on_b.create_task_push_notification_config(hook(first, "b"))
            with pytest.raises(REFUSED, match="PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_TASK=2"):
                await on_a.create_task_push_notification_config(hook(first, "c"))
            await on_a.create_task_push_notification_config(hook(second, "c"))
            # The caller (this machine's address) has three, through both replicas.
            with pytest.raises(REFUSED, match="PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER=3"):
                await on_b.create_task_push_notification_config(hook(second, "d"))
            for task_id in (first, second):
                await on_a.cancel_task(CancelTaskRequest(id=task_id))


async def test_readyz_says_unavailable_when_the_database_is_gone(
    hub_factory: HubFactory, pg_migrated_url: str
) -> None:
    async with hub_factory(database_url=pg_migrated_url) as hub:
        assert (await hub.http.get("/readyz")).status_code == 200
        name = make_url(pg_migrated_url).database
        admin = create_async_engine(
            make_url(pg_migrated_url).set(database="postgres"), isolation_level="AUTOCOMMIT"
        )
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        await admin.dispose()
        answer = await hub.http.get("/readyz")
        assert answer.status_code == 503
        assert answer.json()["database"] == "unreachable"
        assert (await hub.http.get("/healthz")).status_code == 200  # the process still serves


async def test_a_replica_warns_when_postgresql_does_not_vacuum(
    hub_factory: HubFactory, pg_migrated_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="persona_agent.cluster"):
        async with hub_factory(database_url=pg_migrated_url):
            pass
    database = create_engine(pg_migrated_url)
    async with database.connect() as conn:
        setting = (await conn.execute(text("SELECT current_setting('autovacuum')"))).scalar()
    await database.dispose()
    warned = any("autovacuum off" in record.getMessage() for record in caplog.records)
    assert warned == (setting != "on")


async def _v03_stream(
    hub: Hub, persona_id: str, text: str, into: list[dict[str, Any]], first: asyncio.Event
) -> None:
    """A v0.3 ``message/stream`` read as its SSE events' ``result`` objects (``first`` set
    at the first)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "messageId": str(uuid.uuid4()),
                "role": "user",
                "parts": [{"kind": "text", "text": text}],
            }
        },
    }
    async with hub.http.stream("POST", f"/a2a/{persona_id}/", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                into.append(json.loads(line[5:])["result"])
                first.set()


@pytest.mark.parametrize("where", ["same", "other"])
async def test_a_v03_stream_ends_with_one_final_status_update_whichever_replica_cancels(
    pair: tuple[Hub, Hub], llm: FakeLLM, where: str
) -> None:
    """A 0.3 client's stream ends with one ``status-update`` marked ``final``, never a task
    after it (a 0.3 client refuses a second task: "Task is already set")."""
    a, b = pair
    llm.script(Hang())
    events: list[dict[str, Any]] = []
    started = asyncio.Event()
    follower = asyncio.create_task(_v03_stream(a, "socrates", "Hello?", events, started))
    await asyncio.to_thread(llm.wait_requests, 1, 30.0)
    async with asyncio.timeout(30):
        await started.wait()
    task_id = events[0]["id"]
    canceller = await (a if where == "same" else b).client("socrates")
    canceled = await canceller.cancel_task(CancelTaskRequest(id=task_id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    async with asyncio.timeout(30):
        await follower
    assert events[0]["kind"] == "task"
    assert [event["kind"] for event in events[1:]].count("task") == 0, events
    finals = [event for event in events if event.get("final")]
    assert len(finals) == 1, events
    assert finals[0] is events[-1]
    assert events[-1]["kind"] == "status-update"
    assert events[-1]["status"]["state"] == "canceled"
