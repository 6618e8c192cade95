"""Many clients on one context never interleave its history; many contexts run at once."""

from __future__ import annotations

import asyncio
import itertools
import uuid

from a2a.types.a2a_pb2 import CancelTaskRequest, TaskState

from tests.conformance.conftest import MODULE_LOOP
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import answer_text, get_task, send, submit
from tests.integration.conftest import Hub

pytestmark = MODULE_LOOP

N = 20


async def test_concurrent_messages_of_one_context_never_interleave_history(
    module_hub: Hub, llm: FakeLLM
) -> None:
    llm.script(*(Reply(f"Answer {i}.", token_delay=0.002) for i in range(N)))
    clients = [
        await module_hub.client("socrates", t) for t in (("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"))
    ]
    context_id = str(uuid.uuid4())
    async with asyncio.timeout(60):
        tasks = await asyncio.gather(
            *(send(clients[i % 2], f"Question {i}", context_id) for i in range(N))
        )
    assert all(t.status.state == TaskState.TASK_STATE_COMPLETED for t in tasks)

    conversations = [[m for m in r["messages"] if m["role"] != "system"] for r in llm.requests]
    assert len(conversations) == N
    # Each model call saw exactly the previous call's conversation, its answer, and one new
    # question: the turns were taken one at a time, in the order the model was asked.
    answers = {t.history[0].parts[0].text: answer_text(t) for t in tasks}
    for before, after in itertools.pairwise(conversations):
        question = before[-1]["content"]
        assert after[: len(before)] == before
        assert after[len(before)] == {"role": "assistant", "content": answers[question]}
        assert after[len(before) + 1]["role"] == "user"
        assert len(after) == len(before) + 2
    asked = [c[-1]["content"] for c in conversations]
    assert sorted(asked) == sorted(f"Question {i}" for i in range(N))


async def test_many_contexts_are_answered_in_parallel(module_hub: Hub, llm: FakeLLM) -> None:
    # Every model call hangs until canceled: all N can be in progress at once only if no
    # context waits for another.
    llm.script(*(Hang() for _ in range(N)))
    client = await module_hub.client("albert-einstein")
    task_ids = await asyncio.gather(*(submit(client, f"Context {i}") for i in range(N)))
    await asyncio.to_thread(llm.wait_requests, N, 20.0)
    assert llm.active == N
    assert len({tuple(r["messages"][-1].values()) for r in llm.requests}) == N

    canceled = await asyncio.gather(
        *(client.cancel_task(CancelTaskRequest(id=t)) for t in task_ids)
    )
    assert {t.status.state for t in canceled} == {TaskState.TASK_STATE_CANCELED}
    await asyncio.to_thread(llm.wait_idle, 10.0)
    for task_id in task_ids:
        assert (await get_task(client, task_id)).status.state == TaskState.TASK_STATE_CANCELED
