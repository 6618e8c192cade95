"""A caller's memory records and the deletes of memory, on a real SQLite file and on
PostgreSQL: the records' queries (pages both ways, one record, an edit, a search) name
their owner and persona; the tools' forget of an anonymous caller stays in its
conversation; a deleted persona's memory goes, and no other's."""

from __future__ import annotations

import pytest

from persona_agent.db import GroupCommitWriter
from persona_agent.memory.embeddings import HashingEmbedder
from persona_agent.memory.recall import PersonaMemory
from persona_agent.memory.records import MemoryOff, MemoryRecords
from persona_agent.memory.remembered import MemoryStore
from persona_agent.memory.scope import MemoryScope, forget_persona
from persona_agent.memory.shared import SharedMemory

EMBEDDER = HashingEmbedder(dimensions=64)
ALICE = MemoryScope("socrates", "alice", "c1")
BOB = MemoryScope("socrates", "bob", "c2")
ALICE_WITH_HERMIT = MemoryScope("hermit", "alice", "c3")
ANONYMOUS = MemoryScope("socrates", "", "c4")
ANONYMOUS_OTHER = MemoryScope("socrates", "", "c5")


async def remember(store: MemoryStore, scope: MemoryScope, *texts: str) -> None:
    vectors = await EMBEDDER.embed(texts)
    await store.add(scope, EMBEDDER.name, [("user", text) for text in texts], vectors)


async def texts_of(store: MemoryStore, scope: MemoryScope) -> list[str]:
    items, _ = await store.load(scope, EMBEDDER.name)
    return [item.text for item in items]


async def test_a_callers_records_are_paged_edited_searched_and_deleted_as_its_own(
    writer: GroupCommitWriter,
) -> None:
    store = MemoryStore(writer)
    told = ["My dog is called Biscuit.", "I live in Lyon.", "I play the cello."]
    await remember(store, ALICE, *told)
    await remember(store, BOB, "My dog is called Rex.")
    await remember(store, ALICE_WITH_HERMIT, "I am a hermit's friend.")
    records = MemoryRecords(writer, EMBEDDER)

    newest = await records.page("socrates", "alice", before=None, limit=10)
    assert [record.text for record in newest] == told[::-1]
    assert {(r.persona_id, r.conversation, r.role) for r in newest} == {("socrates", "c1", "user")}
    seqs = [record.seq for record in newest]
    older = await records.page("socrates", "alice", before=seqs[0], limit=1)
    assert [record.text for record in older] == [told[1]]
    oldest = await records.oldest_after("socrates", "alice", after=0, limit=2)
    assert [record.text for record in oldest] == told[:2]
    rest = await records.oldest_after("socrates", "alice", after=oldest[-1].seq, limit=2)
    assert [record.text for record in rest] == told[2:]

    dog = newest[2]
    assert await records.get("socrates", "alice", dog.seq) == dog
    assert await records.get("socrates", "bob", dog.seq) is None  # another caller's
    assert await records.get("hermit", "alice", dog.seq) is None  # another persona's
    assert await records.edit("socrates", "bob", dog.seq, "Not mine.") is None

    edited = await records.edit("socrates", "alice", dog.seq, "My dog is called Pip.")
    assert edited is not None
    assert edited.seq > max(seqs)
    assert (edited.persona_id, edited.conversation, edited.role, edited.text) == (
        "socrates",
        "c1",
        "user",
        "My dog is called Pip.",
    )
    assert await records.get("socrates", "alice", dog.seq) is None
    assert await records.get("socrates", "alice", edited.seq) == edited
    assert await texts_of(store, ALICE) == ["My dog is called Pip.", *told[:0:-1]]

    found = await records.search("socrates", "alice", "What is my dog called?", limit=1)
    assert [record.text for record in found] == ["My dog is called Pip."]
    assert await records.search("hermit", "bob", "dog", limit=5) == []

    assert not await records.delete("socrates", "bob", edited.seq)
    assert await records.delete("socrates", "alice", edited.seq)
    assert not await records.delete("socrates", "alice", edited.seq)
    assert await texts_of(store, ALICE) == told[:0:-1]
    with pytest.raises(MemoryOff):
        await MemoryRecords(writer).search("socrates", "alice", "dog", limit=1)

    assert await records.forget_owner("alice") == 3  # with both personas
    assert await records.page("socrates", "alice", before=None, limit=10) == []
    assert await records.page("hermit", "alice", before=None, limit=10) == []
    assert [r.text for r in await records.page("socrates", "bob", before=None, limit=10)] == [
        "My dog is called Rex."
    ]


async def test_an_anonymous_caller_forgets_in_its_conversation_alone(
    writer: GroupCommitWriter,
) -> None:
    memory = PersonaMemory(MemoryStore(writer), EMBEDDER)
    shared = SharedMemory(memory, writer)
    for scope in (ANONYMOUS, ANONYMOUS_OTHER, ALICE):
        await remember(memory.store, scope, "My dog is called Biscuit.", "I live in Lyon.")
    gone = await shared.forget(ANONYMOUS, about="my dog Biscuit")
    assert [found.text for found in gone] == ["My dog is called Biscuit."]
    assert await texts_of(memory.store, ANONYMOUS) == ["I live in Lyon."]
    both = ["I live in Lyon.", "My dog is called Biscuit."]
    assert await texts_of(memory.store, ANONYMOUS_OTHER) == both
    assert await texts_of(memory.store, ALICE) == both
    await memory.aclose()


async def test_a_deleted_persona_s_memory_goes_and_no_other_s(writer: GroupCommitWriter) -> None:
    store = MemoryStore(writer)
    await remember(store, ALICE, "Told Socrates.")
    await remember(store, ALICE_WITH_HERMIT, "Told the hermit.")
    await forget_persona(writer, "socrates")
    assert await texts_of(store, ALICE) == []
    assert await texts_of(store, ALICE_WITH_HERMIT) == ["Told the hermit."]
