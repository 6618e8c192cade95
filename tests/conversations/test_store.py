"""ConversationStore on a real database (SQLite and PostgreSQL): each operation on the stored
branch and its alternatives, and nothing changed by one that fails."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import insert, select

from persona_agent.chat.history import ConversationHistory
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.conversations.message_tables import swipes_table
from persona_agent.conversations.prompt_table import prompts_table
from persona_agent.conversations.storage_quota import StorageLimits, StorageQuota
from persona_agent.conversations.summary_table import summaries_table
from persona_agent.conversations.view import ConversationView
from persona_agent.db import GroupCommitWriter
from persona_agent.errors import (
    ConversationEditError,
    ConversationExistsError,
    ConversationNotFound,
    ConversationStateError,
    MessageNotFound,
    StorageQuotaError,
    SwipeNotFound,
)
from persona_agent.llm.base import Message
from persona_agent.retention import Retention, RetentionLimits

KEY = "ada:c1"


def said(view: ConversationView | None) -> list[tuple[str, object]]:
    assert view is not None
    return [(row.role, row.message.get("content")) for row in view.messages]


def exchange(*texts: str) -> list[Message]:
    """user, assistant, user, assistant...: "q1", "a1", ..."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": text} for i, text in enumerate(texts)]


@pytest.fixture
def history(writer: GroupCommitWriter) -> ConversationHistory:
    return ConversationHistory(writer)


@pytest.fixture
def store(writer: GroupCommitWriter, history: ConversationHistory) -> ConversationStore:
    return ConversationStore(writer, history)


async def snapshot(store: ConversationStore, key: str = KEY) -> tuple[object, object]:
    return await store.branches.rows(key), await store.branches.swipes(key)


async def test_a_regenerated_answer_keeps_the_old_one_as_an_alternative(
    store: ConversationStore, history: ConversationHistory
) -> None:
    await history.append(KEY, exchange("q1", "a1", "q2", "a2"))
    assert await history.load(KEY)  # cached: every change must drop it
    anchor = await store.stash_answer(KEY)
    assert said(await store.read(KEY))[-1] == ("user", "q2")
    assert await history.load(KEY) == exchange("q1", "a1", "q2")
    await history.append(KEY, [{"role": "assistant", "content": "a2 again"}])
    await store.keep_answer(KEY, anchor)
    view = await store.read(KEY)
    assert said(view)[-1] == ("assistant", "a2 again")
    assert view is not None
    (answer,) = view.answers
    assert (answer.anchor, answer.selected, answer.count) == (anchor, 1, 2)
    assert answer.texts == ("a2", "a2 again")
    assert view.alternatives_at(view.messages[-1].id) == answer
    await store.select(KEY, anchor, 0)
    assert said(await store.read(KEY))[-1] == ("assistant", "a2")
    assert (await history.load(KEY))[-1] == {"role": "assistant", "content": "a2"}


async def test_selecting_an_earlier_answer_keeps_what_follows_and_its_alternatives(
    store: ConversationStore, history: ConversationHistory
) -> None:
    await history.append(KEY, exchange("q1", "a1"))
    first = await store.stash_answer(KEY)
    await history.append(KEY, [{"role": "assistant", "content": "a1 bis"}])
    await store.keep_answer(KEY, first)
    await history.append(KEY, exchange("q2", "a2"))
    second = await store.stash_answer(KEY)
    await history.append(KEY, [{"role": "assistant", "content": "a2 bis"}])
    await store.keep_answer(KEY, second)
    await store.select(KEY, first, 0)
    view = await store.read(KEY)
    assert said(view) == [
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2 bis"),
    ]
    assert view is not None
    later = view.messages[2].id  # written again (SQLite may give it its old id back)
    assert [(a.anchor, a.selected, a.texts) for a in view.answers] == [
        (first, 0, ("a1", "a1 bis")),
        (later, 1, ("a2", "a2 bis")),
    ]
    await store.select(KEY, later, 0)
    assert said(await store.read(KEY))[-1] == ("assistant", "a2")


async def test_edit_delete_and_continue(
    store: ConversationStore, history: ConversationHistory
) -> None:
    await history.append(KEY, exchange("q1", "a1", "q2", "a2"))
    ids = [row.id for row in await store.branches.rows(KEY)]
    await store.edit(KEY, ids[0], "q1 edited")
    await store.extend_last(KEY, " and more")
    assert said(await store.read(KEY)) == [
        ("user", "q1 edited"),
        ("assistant", "a1"),
        ("user", "q2"),
        ("assistant", "a2 and more"),
    ]
    await store.delete(KEY, ids[1])
    assert [r for r, _ in said(await store.read(KEY))] == ["user", "user", "assistant"]
    await store.delete(KEY, ids[2], following=True)
    assert said(await store.read(KEY)) == [("user", "q1 edited")]
    assert await history.load(KEY) == [{"role": "user", "content": "q1 edited"}]


async def test_a_tool_call_is_deleted_with_its_results(
    store: ConversationStore, history: ConversationHistory
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    await history.append(
        KEY,
        [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "3"},
            {"role": "assistant", "content": "3 it is"},
        ],
    )
    ids = [row.id for row in await store.branches.rows(KEY)]
    before = await snapshot(store)
    with pytest.raises(ConversationEditError):
        await store.edit(KEY, ids[2], "4")
    assert await snapshot(store) == before
    await store.delete(KEY, ids[2])  # a result goes with its call
    assert said(await store.read(KEY)) == [("user", "q1"), ("assistant", "3 it is")]


async def test_a_conversation_starts_with_a_chosen_greeting(store: ConversationStore) -> None:
    await store.start(KEY, "Hello B", ["Hello A", "Hello B", "Hello C"], 1)
    view = await store.read(KEY)
    assert said(view) == [("assistant", "Hello B")]
    assert view is not None
    (answer,) = view.answers
    assert (answer.anchor, answer.selected, answer.texts) == (
        0,
        1,
        ("Hello A", "Hello B", "Hello C"),
    )
    await store.select(KEY, 0, 2)
    assert said(await store.read(KEY)) == [("assistant", "Hello C")]
    with pytest.raises(ConversationExistsError):
        await store.start(KEY, "Hello A", ["Hello A"], 0)


async def test_a_fork_copies_the_branch_up_to_a_message_with_its_alternatives(
    store: ConversationStore, history: ConversationHistory
) -> None:
    await store.start(KEY, "Hi", ["Hi", "Yo"], 0)
    await history.append(KEY, exchange("q1", "a1", "q2", "a2"))
    ids = [row.id for row in await store.branches.rows(KEY)]
    await store.fork(KEY, ids[2], "ada:c2")
    copy = await store.read("ada:c2")
    assert said(copy) == [("assistant", "Hi"), ("user", "q1"), ("assistant", "a1")]
    assert copy is not None
    assert copy.answers[0].texts == ("Hi", "Yo")
    assert len(said(await store.read(KEY))) == 5
    await store.delete(KEY, ids[4])
    with pytest.raises(MessageNotFound):  # a deleted message cannot be forked
        await store.fork(KEY, ids[4], "ada:c3")
    assert await store.read("ada:c3") is None
    with pytest.raises(ConversationExistsError):
        await store.fork(KEY, ids[1], "ada:c2")


async def test_bad_operations_change_nothing(
    store: ConversationStore, history: ConversationHistory
) -> None:
    await history.append(KEY, exchange("q1", "a1"))
    await history.append("ada:other", exchange("x", "y"))
    other = (await store.branches.rows("ada:other"))[0].id
    before = await snapshot(store)
    with pytest.raises(MessageNotFound):
        await store.edit(KEY, other, "not mine")
    with pytest.raises(MessageNotFound):
        await store.delete(KEY, 10**9)
    with pytest.raises(SwipeNotFound):
        await store.select(KEY, (await store.branches.rows(KEY))[0].id, 1)
    await store.delete(KEY, (await store.branches.rows(KEY))[1].id)
    q1 = (await store.branches.rows(KEY))[0].id
    assert await store.stash_answer(KEY) == q1  # unanswered now: answered, nothing stashed
    assert await store.branches.swipes(KEY) == []
    with pytest.raises(ConversationStateError):
        await store.extend_last(KEY, "more")
    assert said(await store.read(KEY)) == [("user", "q1")]
    assert before != await snapshot(store)
    assert said(await store.read("ada:other")) == [("user", "x"), ("assistant", "y")]


async def test_a_failed_regeneration_puts_the_answer_back(
    store: ConversationStore, history: ConversationHistory
) -> None:
    await history.append(KEY, exchange("q1", "a1"))
    before = await store.read(KEY)
    anchor = await store.stash_answer(KEY)
    await store.branches.restore_answer(KEY, anchor)
    after = await store.read(KEY)
    assert said(after) == said(before)
    assert after is not None
    assert after.answers == ()


async def test_list_shows_a_callers_conversations_latest_first(
    store: ConversationStore, history: ConversationHistory
) -> None:
    await history.append("ada:c1", exchange("q1", "a1"))
    await history.append("ada:@key%3Aann:c2", exchange("q2", "a2 is longer"))
    await history.append("ada:@:@odd", exchange("q3"))
    await history.append("bob:c4", exchange("q4"))
    anonymous = await store.list("ada", "")
    assert [(i.context_id, i.messages, i.preview) for i in anonymous] == [
        ("@odd", 1, "q3"),
        ("c1", 2, "a1"),
    ]
    (ann,) = await store.list("ada", "@key%3Aann:")
    assert (ann.context_id, ann.key, ann.preview) == ("c2", "ada:@key%3Aann:c2", "a2 is longer")


async def test_alternatives_go_with_their_conversation(
    store: ConversationStore, history: ConversationHistory, writer: GroupCommitWriter
) -> None:
    """Forgetting a caller or a persona, and retention, delete the alternatives too."""
    mine, other = "ada:@key%3Aann:c1", "bob:c1"
    for key in (mine, other, "cat:c1"):
        await history.append(key, exchange("q1", "a1"))
        anchor = await store.stash_answer(key)
        await history.append(key, [{"role": "assistant", "content": "a1 again"}])
        await store.keep_answer(key, anchor)  # 2 alternatives
    assert await history.forget_caller("@key%3Aann:") == (1, 2)
    assert await store.read(mine) is None
    await history.forget_persona("bob")
    assert await store.read(other) is None
    assert await store.branches.swipes("cat:c1")
    limits = RetentionLimits(message_max_count=1, message_max_bytes=0)
    await Retention(writer, limits).sweep()  # the user message q1 is gone
    assert await store.branches.swipes("cat:c1") == []


async def test_a_change_to_summarized_messages_drops_the_running_summary(
    store: ConversationStore, history: ConversationHistory, writer: GroupCommitWriter
) -> None:
    await history.append(KEY, exchange("q1", "a1", "q2", "a2"))
    ids = [row.id for row in await store.branches.rows(KEY)]
    row = {"persona_id": "ada", "owner": "", "text": "They met.", "upto_seq": ids[1], "at_ms": 1}
    await writer.write(insert(summaries_table), [{"conversation": KEY, **row}])
    summaries = select(summaries_table.c.text).where(summaries_table.c.conversation == KEY)
    await store.edit(KEY, ids[3], "a2, newer than the summary")
    assert await writer.fetch(summaries) == [("They met.",)]
    await store.edit(KEY, ids[0], "q1, summarized already")
    assert await writer.fetch(summaries) == []  # made again from the messages as they are


async def test_deleting_a_conversation_takes_its_alternatives_summary_and_prompts(
    store: ConversationStore, history: ConversationHistory, writer: GroupCommitWriter
) -> None:
    for key in (KEY, "ada:c2"):
        await history.append(key, exchange("q1", "a1"))
        anchor = await store.stash_answer(key)
        await history.append(key, [{"role": "assistant", "content": "a1 again"}])
        await store.keep_answer(key, anchor)
        answer = (await store.branches.rows(key))[-1].id
        row = {"persona_id": "ada", "owner": "", "text": "Met.", "upto_seq": answer, "at_ms": 1}
        await writer.write(insert(summaries_table), [{"conversation": key, **row}])
        prompt = {"message_id": answer, "record": "{}", "created_ms": 1}
        await writer.write(insert(prompts_table), [{"conversation": key, **prompt}])
    await store.delete_conversation(KEY)
    assert await snapshot(store) == ([], [])
    assert await store.read(KEY) is None
    for table in (summaries_table, prompts_table):
        found = await writer.fetch(select(table.c.conversation))
        assert found == [("ada:c2",)], table.name
    assert len(await store.branches.swipes("ada:c2")) == 2
    with pytest.raises(ConversationNotFound):
        await store.delete_conversation(KEY)


async def test_an_answer_with_tool_calls_is_swapped_whole(
    store: ConversationStore, history: ConversationHistory
) -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    with_tools: list[Message] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_9", "content": "3"},
        {"role": "assistant", "content": "3 it is"},
    ]
    await history.append(KEY, [{"role": "user", "content": "1+2?"}, *with_tools])
    anchor = await store.stash_answer(KEY)
    await history.append(KEY, [{"role": "assistant", "content": "three"}])
    await store.keep_answer(KEY, anchor)
    view = await store.read(KEY)
    assert view is not None
    assert view.answers[0].texts == ("3 it is", "three")
    await store.select(KEY, anchor, 0)
    assert [row.message for row in (await store.branches.rows(KEY))[1:]] == with_tools
    assert await history.load(KEY) == [{"role": "user", "content": "1+2?"}, *with_tools]


async def test_the_storage_quota_counts_other_doors_writes_once_its_count_is_a_minute_old(
    writer: GroupCommitWriter, history: ConversationHistory
) -> None:
    """Writes checked here are added to the caller's count; what another door wrote (an
    A2A turn) is seen at the next count, at most a minute later; a deletion is seen at
    once. Anonymous conversations are held only where they are a caller."""
    now = [0.0]
    quota = StorageQuota(writer, StorageLimits(messages=7), clock=lambda: now[0])
    store = ConversationStore(writer, history, quota=quota)
    mine = "ada:@key%3Aalice:c1"
    await store.create(mine, exchange("q1", "a1"))
    await history.append(mine, exchange("q2", "a2", "q3"))  # an A2A turn: 5 in all
    first = (await store.branches.rows(mine))[1].id
    await store.fork(mine, first, "ada:@key%3Aalice:c2")  # counted 2 + 2: passes
    now[0] += 61
    with pytest.raises(StorageQuotaError, match="keeps 7 messages; this would make 9"):
        await store.fork(mine, first, "ada:@key%3Aalice:c3")
    assert await store.read("ada:@key%3Aalice:c3") is None
    await store.delete_conversation("ada:@key%3Aalice:c2")  # counted again: 5 + 2 fits
    await store.fork(mine, first, "ada:@key%3Aalice:c3")
    # Another caller, and the anonymous conversations of a hub that identifies nobody.
    await store.create("ada:@key%3Abob:c1", exchange(*"abcdef"))
    free = ConversationStore(
        writer,
        history,
        quota=StorageQuota(writer, replace(quota.limits, anonymous_is_a_caller=False)),
    )
    await free.create("ada:c1", exchange(*"abcdefghij"))
    with pytest.raises(StorageQuotaError, match="PERSONA_AGENT_CALLER_MAX_MESSAGES"):
        await store.create("ada:c2", exchange(*"abcdefg"))


async def test_an_edit_past_the_callers_bytes_is_refused_and_a_shorter_one_is_not(
    writer: GroupCommitWriter, history: ConversationHistory
) -> None:
    quota = StorageQuota(writer, StorageLimits(bytes=2000))
    store = ConversationStore(writer, history, quota=quota)
    key = "ada:@key%3Aalice:c1"
    await store.create(key, exchange("q" * 800, "a1"))
    first = (await store.branches.rows(key))[0].id
    with pytest.raises(StorageQuotaError, match="PERSONA_AGENT_CALLER_MAX_MESSAGE_BYTES"):
        await store.edit(key, first, "q" * 2000)
    assert said(await store.read(key))[0] == ("user", "q" * 800)
    await store.edit(key, first, "q" * 900)  # grows within the quota
    await history.append(key, exchange("q2" * 500))  # another door: now over the quota
    quota.changed(key)
    await store.edit(key, first, "shorter")  # a caller over its quota may still shorten
    assert said(await store.read(key))[0] == ("user", "shorter")


async def test_a_regeneration_trims_an_answer_that_kept_301_alternatives_to_100(
    store: ConversationStore, history: ConversationHistory, writer: GroupCommitWriter
) -> None:
    """An answer stored with 301 alternatives (before the cap) keeps the newest 100 at its
    next regeneration, the new answer selected, positions from 0 again."""
    await history.append(KEY, exchange("q1", "a1"))
    anchor = (await store.branches.rows(KEY))[0].id
    rows = [
        {
            "conversation": KEY,
            "anchor": anchor,
            "position": n,
            "messages": None if n == 300 else f'[{{"role": "assistant", "content": "old {n}"}}]',
            "at_ms": n,
        }
        for n in range(301)
    ]
    await writer.write(insert(swipes_table), rows)
    before = await store.read(KEY)
    assert before is not None
    assert before.answers[0].count == 301
    await store.stash_answer(KEY)
    await history.append(KEY, [{"role": "assistant", "content": "new"}])
    await store.keep_answer(KEY, anchor)
    view = await store.read(KEY)
    assert view is not None
    answer = view.answers[0]
    assert (answer.count, answer.selected) == (100, 99)
    assert answer.texts[0] == "old 202"  # 0 to 201 went: the oldest non-selected
    assert answer.texts[-2:] == ("a1", "new")
    positions = [s.position for s in await store.branches.swipes(KEY)]
    assert sorted(positions) == list(range(100))
