"""The prompt records' store (docs/prompt.md), on a SQLite file and PostgreSQL: a record is
kept for the conversation's newest message (its answer), the last ``keep`` of a
conversation stay, a continuation's takes its answer's place, a deleted answer's is not
served, and a retention sweep that deletes the messages takes their records with them."""

from __future__ import annotations

from persona_agent.chat.history import ConversationHistory
from persona_agent.conversations.prompt_store import PromptStore
from persona_agent.db import GroupCommitWriter
from persona_agent.retention import Retention, RetentionLimits


async def turn(history: ConversationHistory, store: PromptStore, number: int) -> None:
    said = [
        {"role": "user", "content": f"q{number}" + "x" * 300},
        {"role": "assistant", "content": f"a{number}"},
    ]
    await history.append("ada:c1", said)
    await store.put("ada:c1", {"turn": number})


async def test_records_are_kept_by_answer_bounded_and_go_with_their_messages(
    writer: GroupCommitWriter,
) -> None:
    history = ConversationHistory(writer)
    store = PromptStore(writer, keep=3)
    assert await store.latest("ada:c1") is None
    await store.put("ada:c1", {"turn": 0})  # no message yet: nothing to key it by
    assert await store.latest("ada:c1") is None
    for number in range(1, 6):
        await turn(history, store, number)
    newest = await store.latest("ada:c1")
    assert newest is not None
    answer, record = newest
    assert record == {"turn": 5}
    assert await store.get("ada:c1", answer) == {"turn": 5}
    assert await store.get("ada:c1", answer - 1) is None  # the user's message
    kept = [await store.get("ada:c1", answer - 2 * back) for back in range(5)]
    assert kept == [{"turn": 5}, {"turn": 4}, {"turn": 3}, None, None]
    assert await store.get("ada:c2", answer) is None  # another conversation's key

    await store.put("ada:c1", {"turn": "5, continued"})  # the same answer, extended
    assert await store.latest("ada:c1") == (answer, {"turn": "5, continued"})
    assert await store.get("ada:c1", answer - 2) == {"turn": 4}

    limits = RetentionLimits(message_max_count=2, message_max_bytes=0)
    await Retention(writer, limits, prune=[store.prune]).sweep()
    assert await store.get("ada:c1", answer - 2) is None  # its messages went, and it
    assert await store.latest("ada:c1") == (answer, {"turn": "5, continued"})


async def test_nothing_is_kept_with_keep_zero(writer: GroupCommitWriter) -> None:
    history = ConversationHistory(writer)
    store = PromptStore(writer, keep=0)
    await turn(history, store, 1)
    assert await store.latest("ada:c1") is None


async def test_a_new_conversations_first_record_is_kept_and_trimmed_later(
    writer: GroupCommitWriter,
) -> None:
    """The first answer of a conversation begun by its turn is written alone (nothing to
    replace or trim); the next turns' trims count it as any other."""
    history = ConversationHistory(writer)
    store = PromptStore(writer, keep=2)
    await history.append(
        "ada:c1", [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    )
    await store.put("ada:c1", {"turn": 0}, new=True)
    first = await store.latest("ada:c1")
    assert first is not None
    assert first[1] == {"turn": 0}
    for number in range(1, 3):
        await turn(history, store, number)
    assert await store.get("ada:c1", first[0]) is None  # two kept: the first went
    assert await store.latest("ada:c1") == (first[0] + 4, {"turn": 2})


async def test_a_record_with_a_lone_surrogate_is_kept(writer: GroupCommitWriter) -> None:
    """A text no valid Unicode (a client's ``\\ud800`` escape) is kept escaped, as written."""
    history = ConversationHistory(writer)
    store = PromptStore(writer)
    await history.append("ada:c1", [{"role": "assistant", "content": "a"}])
    await store.put("ada:c1", {"text": "x\ud800y", "name": "Zoë"})
    newest = await store.latest("ada:c1")
    assert newest is not None
    assert newest[1] == {"text": "x\ud800y", "name": "Zoë"}
