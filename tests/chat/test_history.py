"""ConversationHistory on a real SQLite file: durable, bounded, never split mid tool call."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.chat.history import ConversationHistory, trim_history
from persona_agent.db import GroupCommitWriter
from persona_agent.llm.base import Message


def turn(i: int) -> list[Message]:
    return [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]


async def test_turns_are_durable(engine: AsyncEngine, writer: GroupCommitWriter) -> None:
    history = ConversationHistory(writer)
    await history.append("ada:c1", turn(1))
    await history.append("ada:c1", turn(2))
    fresh = ConversationHistory(writer)
    assert await fresh.load("ada:c1") == turn(1) + turn(2)
    assert await fresh.load("ada:other") == []


async def test_load_returns_a_copy(engine: AsyncEngine, writer: GroupCommitWriter) -> None:
    history = ConversationHistory(writer)
    await history.append("ada:c1", turn(1))
    loaded = await history.load("ada:c1")
    loaded.append({"role": "user", "content": "not saved"})
    assert await history.load("ada:c1") == turn(1)


async def test_cache_is_bounded_and_falls_back_to_the_database(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    history = ConversationHistory(writer, cache_size=3)
    for i in range(10):
        await history.append(f"ada:c{i}", turn(i))
    assert history.cached_conversations == 3
    assert await history.load("ada:c0") == turn(0)  # evicted, read back
    assert history.cached_conversations == 3


async def test_history_is_cut_to_the_last_messages(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    history = ConversationHistory(writer, max_messages=4)
    for i in range(5):
        await history.append("ada:c1", turn(i))
    assert await history.load("ada:c1") == turn(3) + turn(4)
    assert await ConversationHistory(writer, max_messages=4).load("ada:c1") == turn(3) + turn(4)


def test_trim_never_starts_with_a_tool_result() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x"}]},
        {"role": "tool", "tool_call_id": "x", "content": "42"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2"},
    ]
    assert trim_history(messages, 4) == messages[4:]
    assert trim_history(messages, 6) == messages


async def test_cache_is_bounded_in_bytes_too(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    history = ConversationHistory(writer, cache_size=100, cache_bytes=20_000)
    long_turn: list[Message] = [
        {"role": "user", "content": "q" * 3000},
        {"role": "assistant", "content": "a" * 3000},
    ]
    for i in range(10):
        await history.append(f"ada:c{i}", long_turn)
    assert history.cached_bytes <= 20_000
    assert history.cached_conversations == 3  # three of ~6.4 KB each
    assert await history.load("ada:c0") == long_turn  # evicted, read back
    assert history.cached_bytes <= 20_000


async def test_forgetting_a_persona_deletes_its_conversations_only(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    history = ConversationHistory(writer)
    await history.append("ada:c1", turn(1))
    await history.append("ada-2:c1", turn(2))  # another persona whose id starts the same
    await history.forget_persona("ada")
    assert await history.load("ada:c1") == []
    assert await ConversationHistory(writer).load("ada:c1") == []
    assert await history.load("ada-2:c1") == turn(2)
    assert history.cached_bytes > 0
