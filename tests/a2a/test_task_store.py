"""SqlTaskStore on a real SQLite file and PostgreSQL: the SDK's TaskStore contract, isolation,
paging, batching, and its bounded map of what it knows."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGeneratorContext
from a2a.types.a2a_pb2 import (
    Artifact,
    ListTasksRequest,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.context_keys import PERSONA_STATE_KEY, WHOLE_ANSWER_STATE_KEY
from persona_agent.a2a.tasks.task_store import NewTaskIds, SqlTaskStore
from persona_agent.db import GroupCommitWriter, create_engine
from persona_agent.migrations import init_db


class NamedUser(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def ctx(persona: str, user: str = "") -> ServerCallContext:
    context = ServerCallContext(state={PERSONA_STATE_KEY: persona})
    if user:
        context.user = NamedUser(user)
    return context


def make_task(
    task_id: str,
    context_id: str = "c1",
    state: TaskState = TaskState.TASK_STATE_WORKING,
    seconds: int = 0,
) -> Task:
    status = TaskStatus(state=state)
    status.timestamp.FromSeconds(1_700_000_000 + seconds)
    return Task(id=task_id, context_id=context_id, status=status)


async def test_save_get_update_delete(engine: AsyncEngine, writer: GroupCommitWriter) -> None:
    store = SqlTaskStore(writer)
    task = make_task("t1")
    await store.save(task, ctx("ada"))
    assert await store.get("t1", ctx("ada")) == task

    task.status.state = TaskState.TASK_STATE_COMPLETED
    task.artifacts.append(Artifact(artifact_id="a", parts=[Part(text="answer")]))
    await store.save(task, ctx("ada"))
    loaded = await store.get("t1", ctx("ada"))
    assert loaded is not None
    assert loaded.status.state == TaskState.TASK_STATE_COMPLETED
    assert loaded.artifacts[0].parts[0].text == "answer"

    await store.delete("t1", ctx("ada"))
    assert await store.get("t1", ctx("ada")) is None


async def test_a_task_looked_up_before_it_exists_is_found_once_saved(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    # The SDK looks a new task up several times before saving it; absent keys are
    # remembered on a SQLite file, and forgotten when the task is saved.
    store = SqlTaskStore(writer)
    task = make_task("t1", state=TaskState.TASK_STATE_COMPLETED)  # nothing kept pending
    for _ in range(3):
        assert await store.get("t1", ctx("ada")) is None
    await store.save(task, ctx("ada"))
    assert await store.get("t1", ctx("ada")) == task
    await store.delete("t1", ctx("ada"))
    assert await store.get("t1", ctx("ada")) is None
    await store.save(task, ctx("ada"))
    assert await store.get("t1", ctx("ada")) == task
    assert await SqlTaskStore(writer).get("t1", ctx("ada")) == task


async def test_tasks_are_isolated_by_persona_and_user(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    await store.save(make_task("t1"), ctx("ada", "alice"))
    assert await store.get("t1", ctx("ada", "alice")) is not None
    assert await store.get("t1", ctx("socrates", "alice")) is None
    assert await store.get("t1", ctx("ada", "bob")) is None
    assert (await store.list(ListTasksRequest(), ctx("socrates", "alice"))).tasks == []
    await store.delete("t1", ctx("socrates", "alice"))  # not theirs: nothing happens
    assert await store.get("t1", ctx("ada", "alice")) is not None


async def test_tasks_survive_a_new_engine(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'tasks.db'}"
    first = create_engine(url)
    await init_db(first)
    await SqlTaskStore(GroupCommitWriter(first)).save(make_task("t1"), ctx("ada"))
    await first.dispose()
    second = create_engine(url)
    await init_db(second)
    assert await SqlTaskStore(GroupCommitWriter(second)).get("t1", ctx("ada")) is not None
    await second.dispose()


async def test_list_orders_filters_and_pages(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    for i in range(7):
        state = TaskState.TASK_STATE_COMPLETED if i % 2 else TaskState.TASK_STATE_WORKING
        await store.save(
            make_task(f"t{i}", context_id=f"c{i % 3}", state=state, seconds=i), ctx("ada")
        )
    await store.save(make_task("other", seconds=100), ctx("socrates"))

    everything = await store.list(ListTasksRequest(), ctx("ada"))
    assert [t.id for t in everything.tasks] == [f"t{i}" for i in reversed(range(7))]
    assert everything.total_size == 7

    seen: list[str] = []
    token = ""
    while True:
        page = await store.list(ListTasksRequest(page_size=3, page_token=token), ctx("ada"))
        seen += [t.id for t in page.tasks]
        assert page.total_size == 7
        if not page.next_page_token:
            break
        token = page.next_page_token
    assert seen == [t.id for t in everything.tasks]

    by_context = await store.list(ListTasksRequest(context_id="c1"), ctx("ada"))
    assert sorted(t.id for t in by_context.tasks) == ["t1", "t4"]
    done = await store.list(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED), ctx("ada"))
    assert sorted(t.id for t in done.tasks) == ["t1", "t3", "t5"]

    with pytest.raises(InvalidParamsError):
        await store.list(ListTasksRequest(page_token="garbage!"), ctx("ada"))


async def test_list_filters_combine_with_the_status_time_and_pages(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    done = TaskState.TASK_STATE_COMPLETED
    for i in range(12):
        state = done if i % 2 else TaskState.TASK_STATE_WORKING
        await store.save(make_task(f"t{i:02}", f"c{i % 3}", state, seconds=i), ctx("ada"))
    await store.save(make_task("no-time", "c1", done), ctx("ada"))
    await store.save(make_task("theirs", "c1", done, seconds=11), ctx("socrates"))

    after = ListTasksRequest(status=done)
    after.status_timestamp_after.FromSeconds(1_700_000_004)
    recent = await store.list(after, ctx("ada"))
    assert [t.id for t in recent.tasks] == ["t11", "t09", "t07", "t05"]
    assert recent.total_size == 4

    seen: list[str] = []
    token = ""
    while True:
        request = ListTasksRequest(context_id="c1", status=done, page_size=1, page_token=token)
        page = await store.list(request, ctx("ada"))
        assert page.total_size == 3
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert seen == ["t07", "t01", "no-time"]  # a task without a status time comes last


async def test_forgetting_a_persona_deletes_its_tasks_alone(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600)  # no timer flush during the test
    for persona in ("ada", "adam", "socrates"):
        await store.save(make_task(f"{persona}-1"), ctx(persona, "bob"))
        await store.save(make_task(f"{persona}-1", seconds=1), ctx(persona, "bob"))  # pending
        await store.save(make_task(f"{persona}-2"), ctx(persona))
    await store.forget_persona("ada")
    await store.aclose()
    fresh = SqlTaskStore(writer)
    assert await fresh.get("ada-1", ctx("ada", "bob")) is None
    assert await fresh.get("ada-2", ctx("ada")) is None
    adams = await fresh.get("adam-1", ctx("adam", "bob"))
    assert adams is not None
    assert adams.status.timestamp.seconds == 1_700_000_001
    assert (await fresh.list(ListTasksRequest(), ctx("socrates"))).total_size == 1


async def test_fail_unfinished_marks_only_running_tasks(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    await store.save(make_task("running"), ctx("ada"))
    await store.save(make_task("done", state=TaskState.TASK_STATE_COMPLETED), ctx("ada"))
    await store.save(make_task("waiting", state=TaskState.TASK_STATE_INPUT_REQUIRED), ctx("ada"))
    assert await store.fail_unfinished("stopped") == 1
    running = await store.get("running", ctx("ada"))
    assert running is not None
    assert running.status.state == TaskState.TASK_STATE_FAILED
    assert running.status.message.parts[0].text == "stopped"
    done = await store.get("done", ctx("ada"))
    assert done is not None
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert await store.fail_unfinished("stopped") == 0


async def stored(engine: AsyncEngine, task_id: str, persona: str = "ada") -> Task | None:
    """What the database holds, read by a store of its own (no pending copies)."""
    return await SqlTaskStore(GroupCommitWriter(engine)).get(task_id, ctx(persona))


async def test_progress_is_batched_and_the_end_is_written_at_once(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600)  # no timer flush during the test
    await store.save(make_task("t1"), ctx("ada"))  # the first save: written at once
    assert await stored(engine, "t1") is not None

    progress = make_task("t1")
    progress.artifacts.append(Artifact(artifact_id="a", parts=[Part(text="half")]))
    await store.save(progress, ctx("ada"))
    # Pending: the store reads it back, the database does not have it yet.
    seen = await store.get("t1", ctx("ada"))
    assert seen is not None
    assert seen.artifacts[0].parts[0].text == "half"
    in_db = await stored(engine, "t1")
    assert in_db is not None
    assert not in_db.artifacts

    done = make_task("t1", state=TaskState.TASK_STATE_COMPLETED)
    done.artifacts.append(Artifact(artifact_id="a", parts=[Part(text="whole")]))
    await store.save(done, ctx("ada"))
    final = await stored(engine, "t1")  # terminal: in the database when save returns
    assert final is not None
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert final.artifacts[0].parts[0].text == "whole"
    await store.aclose()


async def test_pending_progress_of_many_tasks_is_written_in_one_flush(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=0.01)
    for number in range(50):
        await store.save(make_task(f"t{number}"), ctx("ada"))
    for number in range(50):
        update = make_task(f"t{number}", state=TaskState.TASK_STATE_WORKING, seconds=5)
        await store.save(update, ctx("ada"))
    listed = await store.list(ListTasksRequest(page_size=100), ctx("ada"))  # list flushes
    assert len(listed.tasks) == 50
    assert {t.status.timestamp.seconds for t in listed.tasks} == {1_700_000_005}
    for number in range(50):
        task = await stored(engine, f"t{number}")
        assert task is not None
        assert task.status.timestamp.seconds == 1_700_000_005
    await store.aclose()


async def test_aclose_writes_what_is_pending(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600)
    await store.save(make_task("t1"), ctx("ada"))
    await store.save(make_task("t1", seconds=9), ctx("ada"))
    await store.aclose()
    task = await stored(engine, "t1")
    assert task is not None
    assert task.status.timestamp.seconds == 1_700_000_009


@pytest.mark.parametrize(
    "waiting", [TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED]
)
async def test_a_task_that_waits_for_the_client_is_written_at_once_and_not_tracked(
    engine: AsyncEngine, writer: GroupCommitWriter, waiting: TaskState
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600)  # no timer flush during the test
    await store.save(make_task("t1"), ctx("ada"))
    await store.save(make_task("t1", state=waiting, seconds=1), ctx("ada"))
    paused = await stored(engine, "t1")  # in the database when save returns
    assert paused is not None
    assert paused.status.state == waiting
    assert store.known == 0  # a task that never resumes leaves nothing behind

    await store.save(make_task("t1", seconds=2), ctx("ada"))  # resumed: written at once again
    resumed = await stored(engine, "t1")
    assert resumed is not None
    assert resumed.status.timestamp.seconds == 1_700_000_002
    await store.aclose()


async def test_what_the_store_knows_is_bounded_and_a_forgotten_task_still_saves(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600, max_known=5)
    for number in range(20):  # tasks under way that never end, and lookups of absent ones
        await store.save(make_task(f"t{number}"), ctx("ada"))
        assert await store.get(f"absent{number}", ctx("ada")) is None
    assert store.known == 5
    # t0 was forgotten: its progress is written at once instead of waiting for the flush.
    await store.save(make_task("t0", seconds=7), ctx("ada"))
    t0 = await stored(engine, "t0")
    assert t0 is not None
    assert t0.status.timestamp.seconds == 1_700_000_007
    # t19 is still known: its progress waits for the flush (and reads see it meanwhile).
    await store.save(make_task("t19", seconds=8), ctx("ada"))
    t19 = await stored(engine, "t19")
    assert t19 is not None
    assert t19.status.timestamp.seconds == 1_700_000_000
    seen = await store.get("t19", ctx("ada"))
    assert seen is not None
    assert seen.status.timestamp.seconds == 1_700_000_008
    await store.aclose()


async def test_a_task_saved_while_a_lookup_is_under_way_is_not_marked_absent(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600)
    lookup = asyncio.ensure_future(store.get("t1", ctx("ada")))
    await asyncio.sleep(0)  # the lookup is now waiting for the database
    await store.save(make_task("t1", state=TaskState.TASK_STATE_COMPLETED), ctx("ada"))
    await lookup  # it may or may not have seen the task; it must not hide it afterwards
    found = await store.get("t1", ctx("ada"))
    assert found is not None
    assert found.status.state == TaskState.TASK_STATE_COMPLETED
    await store.aclose()


async def test_a_blocking_sends_task_is_written_once_it_settles(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600)  # no timer flush during the test
    blocking = ctx("ada")
    blocking.state[WHOLE_ANSWER_STATE_KEY] = True  # its client sees only the settled task
    await store.save(make_task("t1", state=TaskState.TASK_STATE_SUBMITTED), blocking)
    await store.save(make_task("t1", seconds=1), blocking)
    assert await stored(engine, "t1") is None  # not written yet
    seen = await store.get("t1", ctx("ada"))  # but read back, as any pending copy
    assert seen is not None
    assert seen.status.timestamp.seconds == 1_700_000_001
    before = writer.transactions

    await store.save(make_task("t1", state=TaskState.TASK_STATE_COMPLETED, seconds=2), blocking)
    final = await stored(engine, "t1")  # in the database when save returns
    assert final is not None
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert writer.transactions == before + 1  # one write for the whole task
    await store.aclose()
    assert writer.transactions == before + 1  # nothing left pending


async def test_a_blocking_sends_task_under_way_is_written_by_the_flush(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=0.01)
    blocking = ctx("ada")
    blocking.state[WHOLE_ANSWER_STATE_KEY] = True
    await store.save(make_task("t1", state=TaskState.TASK_STATE_SUBMITTED), blocking)
    for _ in range(200):  # a long answer: the task is in the database while it runs
        if await stored(engine, "t1") is not None:
            break
        await asyncio.sleep(0.01)
    task = await stored(engine, "t1")
    assert task is not None
    assert task.status.state == TaskState.TASK_STATE_SUBMITTED
    await store.aclose()


async def test_a_new_task_id_is_looked_up_in_memory_until_its_first_save(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer, flush_delay=3600)
    task_id = NewTaskIds(store).generate(IDGeneratorContext())
    # A row no store could have for an id made a moment ago, put there to show that the
    # lookups below are answered without the table.
    await SqlTaskStore(writer).save(make_task(task_id), ctx("ada"))
    assert await store.get(task_id, ctx("ada")) is None
    assert await store.get(task_id, ctx("ada", "someone")) is None

    await store.save(make_task(task_id, seconds=3), ctx("ada"))  # its first save
    found = await store.get(task_id, ctx("ada"))
    assert found is not None
    assert found.status.timestamp.seconds == 1_700_000_003
    other = await store.get(task_id, ctx("ada", "someone"))  # the table again: not theirs
    assert other is None
    await store.aclose()
