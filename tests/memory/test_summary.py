"""The running summary's parts: its section of the prompt for every backend (as
docs/memory.md shows it), its storage on SQLite and PostgreSQL (which messages have left
the window, the compare-and-set write, deletion with the persona and by retention), and
its token budget. The hub's whole path is tests/integration/test_memory_summary.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from sqlalchemy import select

from persona_agent.chat.history import ConversationHistory
from persona_agent.conversations.summary_store import Summary, SummaryStore
from persona_agent.conversations.summary_table import summaries_table
from persona_agent.db import GroupCommitWriter
from persona_agent.llm.local.transcript import build_prompt
from persona_agent.memory.scope import forget_persona
from persona_agent.memory.summary import FOLLOWING, RunningSummary, bounded
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.turn_prompt import (
    REMEMBERED_HEADING,
    SUMMARY_HEADING,
    assemble_prompt,
)
from persona_agent.retention import Retention, RetentionLimits

PERSONAS, _ = load_persona_dir(Path(__file__).resolve().parents[2] / "personas")
SOCRATES = PERSONAS["socrates"]
PAST = [
    {"role": "user", "content": "Let us speak of virtue."},
    {"role": "assistant", "content": "Gladly."},
]
ASKED = [{"role": "user", "content": "What is my dog called?"}]
SUMMARY = "The user's dog is called Biscuit; they asked Socrates what courage is."
MEMORY_DOC = Path(__file__).resolve().parents[2] / "docs" / "memory.md"


def words(text: str) -> int:
    return len(text.split())


async def test_a_chat_model_reads_the_summary_marked_in_the_system_prompt() -> None:
    plain = await assemble_prompt(SOCRATES, PAST, ASKED)
    remembered = ("The user said: My dog is called Biscuit.",)
    sections = await assemble_prompt(SOCRATES, PAST, ASKED, summary=SUMMARY, remembered=remembered)
    system = sections.messages()[0]["content"]
    assert system.startswith(plain.system)
    summary_at = system.index(f"\n\n{SUMMARY_HEADING}\n{SUMMARY}\n\n")
    assert summary_at < system.index(REMEMBERED_HEADING)  # the summary first: the older
    assert sections.messages()[1:] == plain.messages()[1:]  # the conversation as it was


async def test_the_embedded_model_reads_it_as_the_conversation_s_first_line() -> None:
    sections = await assemble_prompt(SOCRATES, PAST, ASKED, summary=SUMMARY)
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    line = f"(Earlier in this conversation: {SUMMARY})"
    assert line in prompt
    assert prompt.index(line) < prompt.index("User: Let us speak of virtue.")
    # Kept when everything else that can go must go to fit.
    shortest = build_prompt(sections, count_tokens=words, budget=1)
    assert "Let us speak of virtue." not in shortest
    assert line in shortest
    plain = await assemble_prompt(SOCRATES, PAST, ASKED)
    assert "Earlier in this conversation" not in build_prompt(
        plain, count_tokens=words, budget=10_000
    )


async def test_docs_memory_shows_the_section_a_chat_model_reads() -> None:
    doc = MEMORY_DOC.read_text("utf-8")
    shown = doc.split(f"```\n{SUMMARY_HEADING}\n", 1)[1].split("```", 1)[0].strip()
    sections = await assemble_prompt(SOCRATES, PAST, ASKED, summary=shown)
    assert sections.messages()[0]["content"].endswith(f"{SUMMARY_HEADING}\n{shown}")


def test_a_summary_is_cut_to_its_budget_after_a_whole_sentence() -> None:
    assert bounded("One.  Two\nthree. ", 100) == "One. Two three."
    assert bounded("First sentence. Second sentence is long.", 20) == "First sentence."
    assert bounded("x" * 50, 10) == "x" * 9 + "…"


async def turns(history: ConversationHistory, key: str, count: int, start: int = 0) -> None:
    for number in range(start, start + count):
        await history.append(
            key,
            [
                {"role": "user", "content": f"Message {number}."},
                {"role": "assistant", "content": f"Answer {number}."},
            ],
        )


async def test_the_messages_that_left_the_window_are_those_the_history_left_out(
    writer: GroupCommitWriter,
) -> None:
    history = ConversationHistory(writer, max_messages=4)
    store = SummaryStore(writer)
    key = "socrates:left"
    await turns(history, key, 2)
    assert await store.window_start(key, 4) is None  # nothing has left yet
    await history.append(key, [{"role": "tool", "tool_call_id": "x", "content": "out"}])
    await turns(history, key, 2, start=2)
    start = await store.window_start(key, 4)
    assert start is not None
    left = await store.evicted(key, 0, start, 100)
    window = await history.load(key)
    # What left and the window: every message once, in order.
    assert [m["content"] for m in [*(item.message for item in left), *window]] == [
        "Message 0.",
        "Answer 0.",
        "Message 1.",
        "Answer 1.",
        "out",
        "Message 2.",
        "Answer 2.",
        "Message 3.",
        "Answer 3.",
    ]
    assert await store.evicted(key, left[1].seq, start, 100) == left[2:]


async def test_a_summary_is_written_only_over_the_one_it_was_made_from(
    writer: GroupCommitWriter,
) -> None:
    store = SummaryStore(writer)
    key, who = "socrates:cas", {"persona_id": "socrates", "owner": ""}
    assert await store.get(key) == Summary()
    first = Summary("First.", 2)
    await store.save(key, **who, summary=first, previous=Summary())
    assert await store.get(key) == first
    # Another replica made one from the empty summary meanwhile: it is dropped.
    await store.save(key, **who, summary=Summary("Stale.", 3), previous=Summary())
    assert await store.get(key) == first
    await store.save(key, **who, summary=Summary("Second.", 4), previous=first)
    assert await store.get(key) == Summary("Second.", 4)


async def test_summaries_go_with_their_persona_and_with_their_last_message(
    writer: GroupCommitWriter,
) -> None:
    history = ConversationHistory(writer, max_messages=4)
    store = SummaryStore(writer)
    for key in ("socrates:a", "hermit:b", "hermit:c"):
        await turns(history, key, 1)
        await store.save(
            key,
            persona_id=key.split(":")[0],
            owner="",
            summary=Summary(f"Of {key}.", 1),
            previous=Summary(),
        )
    await forget_persona(writer, "socrates")
    assert await _keys(writer) == {"hermit:b", "hermit:c"}
    # Retention keeps the newest two messages: hermit:c's; hermit:b's summary goes.
    await Retention(writer, RetentionLimits(message_max_count=2, message_max_bytes=0)).sweep()
    assert await _keys(writer) == {"hermit:c"}


async def _keys(writer: GroupCommitWriter) -> set[str]:
    return {row[0] for row in await writer.fetch(select(summaries_table.c.conversation))}


async def test_a_model_s_longer_summary_is_cut_to_the_budget_and_a_run_waits_for_a_batch(
    writer: GroupCommitWriter,
) -> None:
    history = ConversationHistory(writer, max_messages=10)
    asked: list[list[dict[str, Any]]] = []

    async def chatty_model(
        persona_id: str, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> str:
        """The model's side, on the far side of the backend: a summary far too long."""
        asked.append(messages)
        assert max_tokens == 50
        return "A sentence of the summary. " * 40

    summary = RunningSummary(SummaryStore(writer), chatty_model, max_messages=10, token_budget=50)
    assert summary.batch == 2
    key = "socrates:budget"
    await turns(history, key, 5)  # exactly the window: nothing has left
    await summary.update(SOCRATES, key, "", "m")
    await turns(history, key, 1, start=5)  # two messages have left: a batch
    await summary.update(SOCRATES, key, "", "m")
    text = await summary.current(key)
    assert len(asked) == 1
    assert 150 < len(text) <= 200  # 50 tokens of 4 characters, whole sentences
    assert text.endswith("summary.")


async def test_runs_of_one_conversation_never_overlap_and_a_turn_during_one_is_summarized(
    writer: GroupCommitWriter,
) -> None:
    history = ConversationHistory(writer, max_messages=4)
    asked: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()
    running = most = 0

    async def slow_model(
        persona_id: str, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        asked.append(messages[-1]["content"])
        started.set()
        await release.wait()
        running -= 1
        return f"Summary {len(asked)}."

    summary = RunningSummary(SummaryStore(writer), slow_model, max_messages=4)
    key = "socrates:overlap"
    await turns(history, key, 3)  # the first turn has left the window
    summary.after_turn(SOCRATES, key, "", "m")
    async with asyncio.timeout(60):
        await started.wait()
    await turns(history, key, 1, start=3)  # the second leaves while the first is summarized
    summary.after_turn(SOCRATES, key, "", "m")
    summary.after_turn(SOCRATES, key, "", "m")
    release.set()
    async with asyncio.timeout(60):
        await summary.settled()
    assert most == 1
    assert len(asked) == 2
    following = asked[1].split(FOLLOWING)[1]
    assert "Message 1." in following
    assert "Message 0." not in following
    assert "Summary 1." in asked[1]
    assert await summary.current(key) == "Summary 2."


async def test_a_new_conversation_is_not_read_nor_summarized_while_it_fits_the_window(
    writer: GroupCommitWriter,
) -> None:
    """A turn that opens its conversation tells how many messages it has: while they fit
    the window none has left it, so no run starts (and no summary is read for it)."""
    history = ConversationHistory(writer, max_messages=4)
    asked: list[str] = []

    async def model(
        persona_id: str, model: str, messages: list[dict[str, Any]], max_tokens: int
    ) -> str:
        asked.append(messages[-1]["content"])
        return "Summary."

    summary = RunningSummary(SummaryStore(writer), model, max_messages=4)
    key = "socrates:new"
    await turns(history, key, 2)  # four messages: the window
    summary.after_turn(SOCRATES, key, "", "m", 4)
    assert not summary._tasks  # nothing to do: not even a database read
    await turns(history, key, 2, start=2)  # a first turn of eight messages (tools, say)
    summary.after_turn(SOCRATES, key, "", "m", 8)
    await summary.settled()
    assert len(asked) == 1
    assert await summary.current(key) == "Summary."
    assert await summary.current(key, new=True) == ""  # a new conversation has none
