"""Task states follow the lifecycle, with timestamps: submitted -> working -> terminal."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, StreamResponse, TaskState, TaskStatus

from tests.conformance.conftest import ALL_TRANSPORTS, MODULE_LOOP, TERMINAL_STATES, wait_until
from tests.fakes.fake_llm import Fail, FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import get_task, submit, user_message
from tests.integration.conftest import Hub

pytestmark = MODULE_LOOP


def _statuses(events: list[StreamResponse]) -> list[TaskStatus]:
    statuses = []
    for event in events:
        if event.HasField("task"):
            statuses.append(event.task.status)
        elif event.HasField("status_update"):
            statuses.append(event.status_update.status)
    return statuses


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
@pytest.mark.parametrize(
    ("script", "final"),
    [
        pytest.param(Reply("All done."), TaskState.TASK_STATE_COMPLETED, id="completed"),
        pytest.param(Fail(503, "model asleep"), TaskState.TASK_STATE_FAILED, id="failed"),
    ],
)
async def test_states_go_submitted_working_terminal_with_rising_timestamps(
    module_hub: Hub,
    llm: FakeLLM,
    transport: tuple[str, str],
    script: Reply | Fail,
    final: TaskState,
) -> None:
    llm.script(script)
    client = await module_hub.client("marie-curie", transport, streaming=True)
    async with asyncio.timeout(30):
        events = [e async for e in client.send_message(user_message("Begin."))]

    statuses = _statuses(events)
    states = [s.state for s in statuses]
    assert states[0] == TaskState.TASK_STATE_SUBMITTED
    assert states[1] == TaskState.TASK_STATE_WORKING
    assert states[-1] == final
    assert not set(states[:-1]) & TERMINAL_STATES  # exactly one terminal state, the last
    stamped = [s.timestamp.ToNanoseconds() for s in statuses[1:]]
    assert all(stamped)
    assert stamped == sorted(stamped)
    assert stamped[-1] > stamped[0]
    if final == TaskState.TASK_STATE_FAILED:
        reason = "".join(p.text for p in statuses[-1].message.parts)
        assert "503" in reason
        assert "Traceback" not in reason


async def test_the_submitted_task_has_a_timestamp(module_hub: Hub, llm: FakeLLM) -> None:
    llm.script(Reply("Fine."))
    client = await module_hub.client("marie-curie", streaming=True)
    async with asyncio.timeout(30):
        events = [e async for e in client.send_message(user_message("Begin."))]
    assert events[0].task.status.HasField("timestamp")


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_get_task_of_a_running_task_reports_working(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script(Hang())
    client = await module_hub.client("charles-darwin", transport)
    task_id = await submit(client, "Take your time.")
    await asyncio.to_thread(llm.wait_requests, 1, 5.0)

    async def working() -> bool:
        return (await get_task(client, task_id)).status.state == TaskState.TASK_STATE_WORKING

    await wait_until("the task to report working", working)
    task = await get_task(client, task_id)
    assert task.status.HasField("timestamp")
    await client.cancel_task(CancelTaskRequest(id=task_id))
    await asyncio.to_thread(llm.wait_disconnect, 5.0)
    canceled = await get_task(client, task_id)
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert canceled.status.timestamp.ToNanoseconds() >= task.status.timestamp.ToNanoseconds()
