"""Cancel really stops the work: the LLM stream is closed and the task ends canceled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, TaskState

from tests.fakes.fake_llm import FakeLLM, Hang, Reply, ToolCalls
from tests.integration.a2a_helpers import get_task, submit, user_message, wait_for_state
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): one
    test calls a tool, on a hub of its own with them (``mcp_servers_file``), and each stdio
    server is a process of about 1 s of CPU."""
    return None


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancel_mid_stream_closes_the_llm_stream(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    # The model writes one word, then holds the rest until the hub gives up on it.
    llm.script(Reply(" ".join(f"word{i}" for i in range(200)), hold_after=1))
    streaming = await hub.client("albert-einstein", transport, streaming=True)
    control = await hub.client("albert-einstein", transport)

    events = []
    task_id = None
    async with asyncio.timeout(30):
        async for event in streaming.send_message(user_message("Talk for a long time")):
            events.append(event)
            if event.HasField("artifact_update") and task_id is None:
                task_id = event.artifact_update.task_id
                canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED

    assert task_id is not None
    # The model's stream was closed by the hub, before its 200 tokens.
    await asyncio.to_thread(llm.wait_disconnect)
    await asyncio.to_thread(llm.wait_idle)  # the request is over: nothing more is sent
    assert llm.chunks_sent == 1
    # The stream ended with the canceled state, and the stored task agrees.
    last = events[-1]
    assert last.HasField("status_update")
    assert last.status_update.status.state == TaskState.TASK_STATE_CANCELED
    stored = await get_task(control, task_id)
    assert stored.status.state == TaskState.TASK_STATE_CANCELED


async def test_cancel_while_waiting_for_the_model(hub: Hub, llm: FakeLLM) -> None:
    llm.script(Hang())
    client = await hub.client("socrates")
    task_id = await submit(client, "Hello?")
    await asyncio.to_thread(llm.wait_requests, 1, 5.0)
    canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    await asyncio.to_thread(llm.wait_disconnect, 5.0)


async def test_cancel_during_a_tool_call_abandons_it(
    hub_factory: HubFactory, llm: FakeLLM, mcp_servers_file: Path
) -> None:
    llm.script(ToolCalls([("local__sleep", {"seconds": 30})]), Reply("never"))
    async with hub_factory(mcp_config=mcp_servers_file) as hub:
        client = await hub.client("toolsmith")
        task_id = await submit(client, "Sleep a while.")
        await asyncio.to_thread(llm.wait_requests, 1, 5.0)
        await wait_for_state(client, task_id, TaskState.TASK_STATE_WORKING)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert len(llm.requests) == 1  # the answer after the tool was never asked for
