"""Every A2A method a persona serves, through the official SDK client of each binding and
version: send (blocking, ``returnImmediately``, streaming), get (``historyLength``), list
(pages, filters, scope), cancel and subscribe."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError

from tests.conformance.conftest import (
    ALL_TRANSPORTS,
    ALL_V1_TRANSPORTS,
    MODULE_LOOP,
    TERMINAL_STATES,
    wait_until,
)
from tests.fakes.fake_llm import Fail, FakeLLM, Hang, Reply, ToolCalls
from tests.integration.a2a_helpers import answer_text, get_task, send, submit, user_message
from tests.integration.conftest import Hub

WORDS = [f" word{i}" for i in range(30)]
LONG_ANSWER = "".join(WORDS)

pytestmark = MODULE_LOOP


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_blocking_send_returns_the_terminal_task_with_artifact_and_history(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script(Reply("Know thyself."))
    client = await module_hub.client("socrates", transport)
    task = await send(client, "Advice, please.")

    assert task.id
    assert task.context_id
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.status.HasField("timestamp")
    assert [a.name for a in task.artifacts] == ["answer"]
    assert answer_text(task) == "Know thyself."
    assert task.history[0].role == Role.ROLE_USER
    assert task.history[0].parts[0].text == "Advice, please."


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_return_immediately_answers_at_once_and_the_task_completes_later(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    # The model writes its first word, then waits for the test: the call returns before.
    llm.script(Reply("Well considered.", chunks=["Well ", "considered."], hold_after=1))
    client = await module_hub.client("socrates", transport)
    request = user_message("Think it over.")
    request.configuration.return_immediately = True
    async with asyncio.timeout(60):
        responses = [r async for r in client.send_message(request)]
    assert len(responses) == 1
    task = responses[0].task
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    task_id = task.id
    llm.release()

    async def completed() -> bool:
        return (await get_task(client, task_id)).status.state == TaskState.TASK_STATE_COMPLETED

    await wait_until("the task to complete", completed)
    assert answer_text(await get_task(client, task_id)) == "Well considered."


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_streaming_send_begins_with_the_task_and_ends_in_a_terminal_state(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script(Reply("Eureka, said the other one."))
    client = await module_hub.client("ada-lovelace", transport, streaming=True)
    async with asyncio.timeout(30):
        events = [e async for e in client.send_message(user_message("Shout something."))]

    assert events[0].HasField("task")  # spec 3.1.2: the stream begins with the Task
    task_id = events[0].task.id
    later = events[1:]
    assert later
    for event in later:
        update = event.status_update if event.HasField("status_update") else event.artifact_update
        assert update.task_id == task_id
    last = events[-1]
    assert last.HasField("status_update")
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    chunks = [
        p.text
        for e in later
        if e.HasField("artifact_update")
        for p in e.artifact_update.artifact.parts
    ]
    assert "".join(chunks) == "Eureka, said the other one."


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_get_task_history_length_returns_the_most_recent_messages(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    # Two tool rounds (refused: this hub has no tools) put four agent messages in the history.
    llm.script(
        ToolCalls([("local__add", {"a": 1})]), ToolCalls([("local__echo", {})]), Reply("Ok.")
    )
    client = await module_hub.client("socrates", transport)
    task = await send(client, "Count, then answer.")

    async def history(length: int | None) -> list[str]:
        request = GetTaskRequest(id=task.id)
        if length is not None:
            request.history_length = length
        found = await client.get_task(request)
        return [m.message_id for m in found.history]

    everything = await history(None)
    assert len(everything) == 5  # the user's message, then a call and a result per tool
    if transport[1] == "1.0":  # 0.3 has no "0 means none": its int32 0 is "unset"
        assert await history(0) == []
    assert await history(1) == everything[-1:]
    assert await history(3) == everything[-3:]
    assert await history(50) == everything


async def _tasks_of(client: Client, **filters: object) -> tuple[list[Task], list[str]]:
    """Every page of a ListTasks query: the tasks in order, and the page tokens seen."""
    tasks: list[Task] = []
    tokens: list[str] = []
    token = ""
    async with asyncio.timeout(60):
        while True:
            page = await client.list_tasks(ListTasksRequest(page_token=token, **filters))  # type: ignore[arg-type]
            assert len(page.tasks) <= page.page_size
            tasks.extend(page.tasks)
            token = page.next_page_token
            tokens.append(token)
            if not token:
                return tasks, tokens


@pytest.mark.parametrize("transport", ALL_V1_TRANSPORTS)
async def test_list_tasks_pages_filters_and_is_scoped_to_the_persona(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    # Personas no other test of this module (which shares one hub) talks to.
    client = await module_hub.client("hermit", transport)
    other = await module_hub.client("toolsmith", transport)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    in_first = [(await send(client, f"First {i}", first)).id for i in range(5)]
    llm.script(Fail(500))
    failed = await send(client, "This one fails", second)
    in_second = [failed.id, (await send(client, "Second ok", second)).id]
    elsewhere = await send(other, "Not for the hermit", first)

    # Paging through one context: 5 tasks in pages of 2, each once, newest first.
    tasks, tokens = await _tasks_of(client, context_id=first, page_size=2)
    assert [t.id for t in tasks] == list(reversed(in_first))
    assert len(tokens) == 3
    assert tokens[-1] == ""
    stamps = [t.status.timestamp.ToNanoseconds() for t in tasks]
    assert stamps == sorted(stamps, reverse=True)
    page = await client.list_tasks(ListTasksRequest(context_id=first, page_size=2))
    assert page.total_size == 5
    assert not any(t.artifacts for t in tasks)  # includeArtifacts is false by default

    # Filters: by status, by context, both.
    completed, _ = await _tasks_of(client, status=TaskState.TASK_STATE_COMPLETED)
    assert {t.status.state for t in completed} == {TaskState.TASK_STATE_COMPLETED}
    assert set(in_first) | {in_second[1]} <= {t.id for t in completed}
    failures, _ = await _tasks_of(
        client, context_id=second, status=TaskState.TASK_STATE_FAILED, page_size=1
    )
    assert [t.id for t in failures] == [failed.id]

    # Scope: each persona lists its own tasks, never the other's (even of the same context).
    everything, _ = await _tasks_of(client, page_size=100)
    listed = {t.id for t in everything}
    assert set(in_first) | set(in_second) <= listed
    assert elsewhere.id not in listed
    theirs, _ = await _tasks_of(other, page_size=100)
    assert elsewhere.id in {t.id for t in theirs}
    assert not listed & {t.id for t in theirs}


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_cancel_a_running_task_then_it_is_not_cancelable(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script(Hang())
    client = await module_hub.client("charles-darwin", transport)
    task_id = await submit(client, "Describe every finch.")
    await asyncio.to_thread(llm.wait_requests, 1, 5.0)

    canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
    assert canceled.id == task_id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert (await get_task(client, task_id)).status.state == TaskState.TASK_STATE_CANCELED
    await asyncio.to_thread(llm.wait_disconnect, 5.0)  # the model call was abandoned
    if transport != ("HTTP+JSON", "0.3"):  # that client cannot read a 1.0 error body
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))


def _artifact_text(event: StreamResponse) -> str:
    return "".join(p.text for p in event.artifact_update.artifact.parts)


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_subscribe_to_a_running_task_gives_a_snapshot_then_every_later_event(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    # The model holds the rest of its answer after 14 words until every subscriber is in.
    llm.script(Reply(LONG_ANSWER, chunks=WORDS, token_delay=0.04, hold_after=14))
    client = await module_hub.client("albert-einstein", transport, streaming=True)
    polling = await module_hub.client("albert-einstein", transport)
    task_id = await submit(polling, "Explain relativity slowly.")

    async def some_answer() -> bool:
        return len(answer_text(await get_task(polling, task_id))) >= 3 * len(WORDS[0])

    await wait_until("part of the answer", some_answer)
    subscribed = [asyncio.Event() for _ in range(6)]

    async def subscription(n: int) -> list[StreamResponse]:
        # Several seams, at different points of the answer: once the model has sent so much.
        ready = subscribed[n]
        await asyncio.to_thread(llm.wait_chunks, 3 + 2 * n)
        events = []
        async for event in client.subscribe(SubscribeToTaskRequest(id=task_id)):
            events.append(event)
            ready.set()
        return events

    async def release_once_all_subscribed() -> None:
        for ready in subscribed:
            await ready.wait()
        llm.release()

    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        group.create_task(release_once_all_subscribed())
        running = [group.create_task(subscription(n)) for n in range(6)]
    subscriptions = [task.result() for task in running]

    for events in subscriptions:
        snapshot = events[0]
        assert snapshot.HasField("task"), "the first event of a subscription is the task"
        assert snapshot.task.id == task_id
        assert snapshot.task.status.state == TaskState.TASK_STATE_WORKING
        before = answer_text(snapshot.task)
        after = [_artifact_text(e) for e in events[1:] if e.HasField("artifact_update")]
        # What the snapshot had, then the later chunks, is the whole answer: no gap and no
        # chunk twice (the SDK repeated the one applied between its tap and its snapshot).
        assert LONG_ANSWER.startswith(before)
        assert "".join(after) == LONG_ANSWER[len(before) :]
        assert after[-1] == ""  # the last chunk
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        states = [e.status_update.status.state for e in events if e.HasField("status_update")]
        assert states[-1] in TERMINAL_STATES
        assert not set(states[:-1]) & TERMINAL_STATES
        assert states.count(TaskState.TASK_STATE_WORKING) <= 1  # no status twice either
