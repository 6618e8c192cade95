"""Retention on real databases (a SQLite file and PostgreSQL): the oldest tasks,
messages and memories over a limit are deleted, running tasks never, push configs with
their tasks, a conversation's documents with its last message, and the loop sweeps until
stopped; messages per caller first, and the hub's limit shared fairly, so that one
caller's growth never deletes another's conversation."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace

from a2a.types.a2a_pb2 import (
    Artifact,
    Part,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from sqlalchemy import bindparam, insert, update
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.tasks.push import ConfigLimits, IndexedConfigStore
from persona_agent.a2a.tasks.task_store import SqlTaskStore
from persona_agent.chat.history import ConversationHistory
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.conversations.message_retention import fair_level
from persona_agent.conversations.message_tables import messages_table
from persona_agent.db import GroupCommitWriter
from persona_agent.knowledge.document_tables import documents_table
from persona_agent.knowledge.turn import AttachedFile
from persona_agent.memory.memory_table import memories_table
from persona_agent.memory.records import MemoryRecords
from persona_agent.retention import DOCUMENT_GRACE_SECONDS, Retention, RetentionLimits
from tests.a2a.test_task_store import ctx
from tests.knowledge.test_library import knowledge

DONE = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING
NOTHING = RetentionLimits(
    task_max_age_days=0,
    task_max_count=0,
    task_max_bytes=0,
    message_max_count=0,
    message_max_bytes=0,
    memory_max_age_days=0,
)


def task(task_id: str, state: TaskState, days_ago: float, size: int = 10) -> Task:
    status = TaskStatus(state=state)
    status.timestamp.FromNanoseconds(time.time_ns() - int(days_ago * 86_400 * 1e9))
    answer = Artifact(artifact_id="a", parts=[Part(text="x" * size)])
    return Task(id=task_id, context_id="c1", status=status, artifacts=[answer])


async def kept(store: SqlTaskStore, *ids: str) -> list[str]:
    return [i for i in ids if await store.get(i, ctx("ada")) is not None]


async def test_tasks_older_than_the_age_limit_go_and_running_ones_stay(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    for task_id, state, days in [("old", DONE, 40), ("old-running", WORKING, 40), ("new", DONE, 1)]:
        await store.save(task(task_id, state, days), ctx("ada"))
    limits = RetentionLimits(task_max_age_days=30, task_max_count=0, task_max_bytes=0)
    await Retention(writer, limits).sweep()
    assert await kept(SqlTaskStore(writer), "old", "old-running", "new") == ["old-running", "new"]


async def test_the_newest_tasks_within_the_count_and_bytes_stay(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    for number in range(6):
        await store.save(task(f"t{number}", DONE, 6 - number, size=1000), ctx("ada"))
    counted = RetentionLimits(task_max_age_days=0, task_max_count=4, task_max_bytes=0)
    await Retention(writer, counted).sweep()
    fresh = SqlTaskStore(writer)
    assert await kept(fresh, *(f"t{n}" for n in range(6))) == ["t2", "t3", "t4", "t5"]
    sized = RetentionLimits(task_max_age_days=0, task_max_count=0, task_max_bytes=2500)
    await Retention(writer, sized).sweep()  # each task is some 1 KB serialized
    assert await kept(SqlTaskStore(writer), *(f"t{n}" for n in range(6))) == ["t4", "t5"]


async def test_the_newest_messages_within_the_count_and_bytes_stay(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    history = ConversationHistory(writer)
    for number in range(5):
        await history.append(
            "ada:c1",
            [
                {"role": "user", "content": f"q{number}" + "x" * 500},
                {"role": "assistant", "content": f"a{number}"},
            ],
        )
    await Retention(writer, RetentionLimits(message_max_count=4, message_max_bytes=0)).sweep()
    loaded = await ConversationHistory(writer).load("ada:c1")
    assert [m["content"][:2] for m in loaded] == ["q3", "a3", "q4", "a4"]
    await Retention(writer, RetentionLimits(message_max_count=0, message_max_bytes=600)).sweep()
    loaded = await ConversationHistory(writer).load("ada:c1")
    assert [m["content"][:2] for m in loaded] == ["q4", "a4"]


async def test_a_conversations_documents_go_with_its_last_message(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    library = knowledge(writer)
    history = ConversationHistory(writer)
    persona_own = await library.add("ada", "handbook.md", b"The persona's own handbook.")
    for conversation, text in [("old", "first"), ("kept", "second"), ("young", "third")]:
        note = AttachedFile(f"{conversation}.html", "text/html", f"<p>{text} note</p>".encode())
        await library.for_turn("ada", conversation, "note?", [note])
    # "old" and "kept" were attached two hours ago; "young" is still in its first turn.
    aged = int((time.time() - 2 * DOCUMENT_GRACE_SECONDS) * 1000)
    older = update(documents_table).where(documents_table.c.conversation == bindparam("key"))
    rows = [{"key": key, "aged": aged} for key in ("old", "kept")]
    await writer.write(older.values(created_ms=bindparam("aged")), rows)
    await history.append("ada:old", [{"role": "user", "content": "q" * 500}])
    await history.append("ada:kept", [{"role": "user", "content": "q2"}])

    async def attached() -> list[str]:
        return sorted(d.conversation for d in await library.attached("ada", "") if d.conversation)

    await Retention(writer, NOTHING).sweep()  # no message limit: nothing goes
    assert await attached() == ["kept", "old", "young"]
    limits = RetentionLimits(message_max_count=0, message_max_bytes=100)
    await Retention(writer, limits).sweep()  # the old conversation's message goes
    assert await ConversationHistory(writer).load("ada:old") == []
    assert await attached() == ["kept", "young"]
    assert [d.id for d in await library.documents("ada")] == [persona_own.id]
    passages = await library.store.passages("ada", "old")  # its passages went with it
    assert [passage.text for passage in passages] == ["The persona's own handbook."]


async def test_memories_older_than_the_age_limit_go(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    now_ms = int(time.time() * 1000)
    rows = [
        {
            "persona_id": "ada",
            "owner": "key:alice",
            "conversation": "@key%3Aalice:c1",
            "role": "user",
            "text": text,
            "model": "hashing-512",
            "vector": b"\0" * 8,
            "at_ms": now_ms - int(days_ago * 86_400_000),
        }
        for text, days_ago in [("a year and a day", 366), ("a month", 30), ("today", 0)]
    ]
    await writer.write(insert(memories_table), rows)
    await Retention(writer, NOTHING).sweep()
    records = MemoryRecords(writer)
    assert len(await records.page("ada", "key:alice", before=None, limit=10)) == 3
    await Retention(writer, RetentionLimits(memory_max_age_days=365)).sweep()
    left = await records.page("ada", "key:alice", before=None, limit=10)
    assert [record.text for record in left] == ["today", "a month"]
    await Retention(writer, RetentionLimits(memory_max_age_days=7)).sweep()
    left = await records.page("ada", "key:alice", before=None, limit=10)
    assert [record.text for record in left] == ["today"]


async def test_no_limits_delete_nothing(engine: AsyncEngine, writer: GroupCommitWriter) -> None:
    store = SqlTaskStore(writer)
    await store.save(task("ancient", DONE, 10_000), ctx("ada"))
    await Retention(writer, NOTHING).sweep()
    assert await kept(SqlTaskStore(writer), "ancient") == ["ancient"]


async def test_the_loop_sweeps_at_once_and_stops_when_asked(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    await store.save(task("old", DONE, 40), ctx("ada"))
    retention = Retention(writer, RetentionLimits(task_max_age_days=30))
    stop = asyncio.Event()
    running = asyncio.create_task(retention.run(stop, interval=3600))
    fresh = SqlTaskStore(writer)
    async with asyncio.timeout(60):
        # No event says a sweep is done: the store is polled (the first runs at once).
        while await kept(fresh, "old"):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    stop.set()
    async with asyncio.timeout(60):
        await running  # ends without waiting out the hour


async def test_push_configs_go_with_their_tasks(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    store = SqlTaskStore(writer)
    old, new = str(uuid.uuid4()), str(uuid.uuid4())  # the SDK's table outlives test databases
    for task_id, days in [(old, 40), (new, 1)]:
        await store.save(task(task_id, DONE, days), ctx("ada"))
    configs = IndexedConfigStore(writer, limits=ConfigLimits(unstored_seconds=0))
    for task_id in (old, new):
        hook = TaskPushNotificationConfig(task_id=task_id, id="h", url="https://example.org/h")
        await configs.set_info(task_id, hook, ctx("ada"))
    limits = RetentionLimits(task_max_age_days=30, task_max_count=0, task_max_bytes=0)
    await Retention(writer, limits, prune=[configs.prune]).sweep()
    assert await configs.get_info_for_dispatch(old) == []
    assert [c.id for c in await configs.get_info_for_dispatch(new)] == ["h"]


ALICE = "gwen:@key%3Aalice:"
MALLORY = "gwen:@key%3Amallory:"


async def conversation_of(store: ConversationStore, key: str, messages: int, size: int) -> None:
    roles = ("user", "assistant")
    await store.create(
        key, [{"role": roles[i % 2], "content": f"{i:04d}" + "x" * size} for i in range(messages)]
    )


async def said(store: ConversationStore, key: str) -> list[str]:
    return [str(row.message["content"])[:4] for row in await store.branches.rows(key)]


async def test_another_callers_forks_never_delete_alices_conversation(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    """Issue 46's attack: alice's conversation, then another caller's import and forks
    past the hub's limit; the sweep takes the grower's oldest, never alice's."""
    store = ConversationStore(writer, ConversationHistory(writer))
    await conversation_of(store, ALICE + "mine", 10, 100)
    await conversation_of(store, MALLORY + "import", 20, 1000)
    last = (await store.branches.rows(MALLORY + "import"))[-1].id
    for number in range(10):
        await store.fork(MALLORY + "import", last, f"{MALLORY}fork{number}")
    alices = await said(store, ALICE + "mine")
    limits = RetentionLimits(
        message_max_count=0, message_max_bytes=100_000, caller_message_max_bytes=50_000
    )
    await Retention(writer, limits).sweep()
    assert await said(store, ALICE + "mine") == alices
    # The grower lost its own oldest: the import and the first forks, not the last fork.
    assert await store.read(MALLORY + "import") is None
    assert len(await said(store, MALLORY + "fork9")) == 20
    kept = [len(await said(store, f"{MALLORY}fork{n}")) for n in range(10)]
    assert 0 < sum(kept) * 1000 <= 50_000


async def test_the_hubs_limit_is_shared_fairly(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    """No caller budget: past the hub's limit, those over the fair level lose their
    oldest down to it, and one under its share (limit / callers) loses nothing."""
    store = ConversationStore(writer, ConversationHistory(writer))
    await conversation_of(store, ALICE + "mine", 30, 1000)  # some 30 KB
    await conversation_of(store, "gwen:anonymous", 30, 1000)  # every anonymous caller's
    for number in range(6):
        await conversation_of(store, f"{MALLORY}c{number}", 30, 1000)  # some 180 KB
    alices = await said(store, ALICE + "mine")
    await Retention(writer, RetentionLimits(message_max_count=0, message_max_bytes=120_000)).sweep()
    assert await said(store, ALICE + "mine") == alices
    assert len(await said(store, "gwen:anonymous")) == 30
    malloys = [len(await said(store, f"{MALLORY}c{n}")) for n in range(6)]
    assert sum(malloys) <= 60  # the level: (120 KB - 2 x 30 KB), some 60 messages
    assert malloys[-1] == 30  # the newest kept whole
    # The message count is shared the same way.
    await Retention(writer, RetentionLimits(message_max_count=90, message_max_bytes=0)).sweep()
    assert await said(store, ALICE + "mine") == alices
    assert len(await said(store, "gwen:anonymous")) == 30
    assert sum([len(await said(store, f"{MALLORY}c{n}")) for n in range(6)]) == 30


async def test_anonymous_conversations_are_one_caller(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    """Anonymous callers cannot be told apart: together they are held to one budget on
    a hub that identifies callers, and to none on a hub where they are all there is."""
    store = ConversationStore(writer, ConversationHistory(writer))
    await conversation_of(store, ALICE + "mine", 10, 10)
    for number in range(5):
        await conversation_of(store, f"gwen:stranger{number}", 10, 10)
    free = RetentionLimits(
        message_max_count=0,
        message_max_bytes=0,
        caller_message_max_count=20,
        anonymous_is_a_caller=False,
    )
    await Retention(writer, free).sweep()
    assert sum([len(await said(store, f"gwen:stranger{n}")) for n in range(5)]) == 50
    await Retention(writer, replace(free, anonymous_is_a_caller=True)).sweep()
    assert sum([len(await said(store, f"gwen:stranger{n}")) for n in range(5)]) == 20
    assert len(await said(store, ALICE + "mine")) == 10


def test_the_fair_level_never_cuts_a_caller_under_its_share() -> None:
    wants = {"a": 10, "b": 50, "c": 500}
    assert fair_level(wants, 0) is None  # no limit
    assert fair_level(wants, 1000) is None  # all fit
    assert fair_level(wants, 300) == 240  # a and b keep all, c 240
    assert fair_level(wants, 90) == 40  # a keeps all, b and c 40 each
    assert fair_level({"a": 5, "b": 5}, 9) == 4
    assert fair_level({"a": 5, "b": 5, "c": 5}, 3) == 1  # never under the share


async def test_many_callers_over_the_level_are_trimmed_in_one_sweep(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    """More callers over the fair level than a trim names: each still keeps the level."""
    rows = [
        {
            "conversation": f"gwen:@key%3Ac{n}:x",
            "message": f'{{"role": "user", "content": "{n}-{i}"}}',
            "at_ms": 0,
        }
        for n in range(600)
        for i in range(2)
    ]
    await writer.write(insert(messages_table), rows)
    store = ConversationStore(writer, ConversationHistory(writer))
    limits = RetentionLimits(message_max_count=600, message_max_bytes=0)
    await Retention(writer, limits).sweep()
    kept = [await store.branches.rows(f"gwen:@key%3Ac{n}:x") for n in (0, 299, 599)]
    contents = [[row.message["content"] for row in rows] for rows in kept]
    assert contents == [["0-1"], ["299-1"], ["599-1"]]
