"""The memory store and its in-process indexes, on a real SQLite file and on PostgreSQL:
a search sees what was added or deleted in the database, through this store or another
(a second hub on the same database); one scope's rows never reach another's index; the
cache stays within its bound; rows of another embedder are re-embedded and found.

The index's keyword scores are held equal to the reference BM25 over every text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import bindparam, delete

from persona_agent.db import GroupCommitWriter, create_engine
from persona_agent.memory.embeddings import HashingEmbedder
from persona_agent.memory.index import Remembered, ScopeIndex
from persona_agent.memory.memory_table import memories_table
from persona_agent.memory.recall import PersonaMemory
from persona_agent.memory.remembered import MemoryStore
from persona_agent.memory.retrieval import keyword_scores
from persona_agent.memory.scope import MemoryScope
from persona_agent.memory.shared import SharedMemory
from persona_agent.migrations import prepare_db
from tests.conftest import empty_postgres

ALICE = MemoryScope("socrates", "alice", "c1")
ALICE_ELSEWHERE = MemoryScope("socrates", "alice", "c2")  # the same memory: identified
BOB = MemoryScope("socrates", "bob", "c3")
ANONYMOUS = MemoryScope("socrates", "", "c4")
ANONYMOUS_OTHER = MemoryScope("socrates", "", "c5")
HERMIT = MemoryScope("hermit", "alice", "c1")
EMBEDDER = HashingEmbedder(dimensions=64)


@pytest.fixture(params=["sqlite", "postgresql"])
async def writers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[list[GroupCommitWriter]]:
    """Two writers on one database, as two hubs have."""
    if request.param == "postgresql":
        url = await empty_postgres()
    else:
        url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    engines = [create_engine(url), create_engine(url)]
    await prepare_db(engines[0], auto_upgrade=True)
    made = [GroupCommitWriter(engine) for engine in engines]
    yield made
    for writer in made:
        await writer.aclose()
        await writer.engine.dispose()


async def remember(store: MemoryStore, scope: MemoryScope, *texts: str) -> None:
    vectors = await EMBEDDER.embed(texts)
    await store.add(scope, EMBEDDER.name, [("user", text) for text in texts], vectors)


async def texts_of(
    store: MemoryStore, scope: MemoryScope, embedder: str = EMBEDDER.name
) -> list[str]:
    items, _ = await store.load(scope, embedder)
    return [item.text for item in items]


async def test_a_search_sees_what_another_hub_adds_and_deletes(
    writers: list[GroupCommitWriter],
) -> None:
    here, there = MemoryStore(writers[0]), MemoryStore(writers[1])
    await remember(here, ALICE, "My dog is called Biscuit.", "I was born in Lisbon.")
    assert await texts_of(here, ALICE) == ["I was born in Lisbon.", "My dog is called Biscuit."]
    assert await texts_of(there, ALICE) == ["I was born in Lisbon.", "My dog is called Biscuit."]
    assert (here.reads, there.reads) == (1, 1)

    await remember(there, ALICE_ELSEWHERE, "I play the cello.")  # added: read alone
    assert (await texts_of(here, ALICE))[0] == "I play the cello."
    assert here.reads == 1
    assert await texts_of(here, ALICE) == await texts_of(there, ALICE)

    # Deleted by the other hub (as an edit is: a delete and an insert): read again.
    forget = delete(memories_table).where(memories_table.c.text == bindparam("b_text"))
    await writers[1].write(forget, [{"b_text": "I was born in Lisbon."}])
    assert await texts_of(here, ALICE) == ["I play the cello.", "My dog is called Biscuit."]
    assert here.reads == 2
    await writers[1].write(forget, [{"b_text": "I play the cello."}])
    await remember(there, ALICE, "I play the viola.")  # the count unchanged, the seq higher
    assert await texts_of(here, ALICE) == ["I play the viola.", "My dog is called Biscuit."]


async def test_no_scope_sees_another_s_rows(writers: list[GroupCommitWriter]) -> None:
    store = MemoryStore(writers[0])
    for scope in (ALICE, BOB, ANONYMOUS, ANONYMOUS_OTHER, HERMIT):
        await remember(store, scope, f"secret of {scope.owner or 'nobody'} in {scope.conversation}")
    assert await texts_of(store, ALICE) == ["secret of alice in c1"]
    assert await texts_of(store, ALICE_ELSEWHERE) == ["secret of alice in c1"]
    assert await texts_of(store, BOB) == ["secret of bob in c3"]
    assert await texts_of(store, ANONYMOUS) == ["secret of nobody in c4"]
    assert await texts_of(store, ANONYMOUS_OTHER) == ["secret of nobody in c5"]
    assert await texts_of(store, HERMIT) == ["secret of alice in c1"]
    assert await texts_of(store, MemoryScope("socrates", "carol", "c1")) == []
    # Another embedder's rows are not this one's (their vectors cannot be compared).
    items, _ = await store.load(ALICE, "hashing-128")
    assert items == []


async def test_the_cache_stays_within_its_bytes_and_still_answers(
    writers: list[GroupCommitWriter],
) -> None:
    probe = MemoryStore(writers[0])
    await remember(probe, ALICE, *(f"fact number {n} about alice" for n in range(40)))
    await texts_of(probe, ALICE)
    one_scope = probe.cached_bytes
    assert one_scope > 0

    store = MemoryStore(writers[0], cache_bytes=one_scope + one_scope // 2)
    await remember(store, BOB, *(f"fact number {n} about bob" for n in range(40)))
    assert len(await texts_of(store, ALICE)) == 40
    assert len(await texts_of(store, BOB)) == 40  # Alice's index goes: both do not fit
    assert store.cached_bytes <= store.cache_bytes
    assert len(await texts_of(store, ALICE)) == 40
    assert store.reads == 3

    tiny = MemoryStore(writers[0], cache_bytes=one_scope // 2)  # a scope over the bound
    assert len(await texts_of(tiny, ALICE)) == 40
    assert len(await texts_of(tiny, ALICE)) == 40
    assert (tiny.cached_bytes, tiny.reads) == (0, 2)


async def test_a_scope_over_its_row_bound_keeps_its_newest(
    writers: list[GroupCommitWriter],
) -> None:
    store = MemoryStore(writers[0], max_rows=8)
    await remember(store, ALICE, *(f"early {n}" for n in range(12)))
    assert await texts_of(store, ALICE) == [f"early {n}" for n in range(11, 3, -1)]
    for n in range(4):  # grown past 10 (the bound and a quarter): cut to the newest 8
        await remember(store, ALICE, f"late {n}")
        texts = await texts_of(store, ALICE)
        assert texts[0] == f"late {n}"
    newest = ["late 3", "late 2", "late 1", "late 0", "early 11", "early 10", "early 9"]
    assert texts == [*newest, "early 8", "early 7"]  # cut at 11 rows, then one more
    assert await texts_of(MemoryStore(writers[0], max_rows=8), ALICE) == [*newest, "early 8"]


async def test_memories_of_another_embedder_are_re_embedded_and_found(
    writers: list[GroupCommitWriter],
) -> None:
    store = MemoryStore(writers[0])
    await remember(store, ALICE, "My dog is called Biscuit.", *(f"filler {n}" for n in range(30)))
    memory = PersonaMemory(MemoryStore(writers[1]), HashingEmbedder(dimensions=128))
    memory.reembedder.max_rows = 4  # bounded steps
    assert await texts_of(memory.store, ALICE, "hashing-128") == []  # not compared
    steps = []
    while done := await memory.reembedder.step():
        steps.append(done)
    assert sum(steps) == 31
    assert max(steps) <= 4
    recalled = await memory.recall(ALICE, "What is the name of my dog Biscuit?", [])
    assert recalled[0] == "The user said: My dog is called Biscuit."
    assert await memory.reembedder.step() == 0
    await memory.aclose()


def test_the_index_scores_keywords_as_the_reference_does() -> None:
    rng = np.random.default_rng(7)
    vocabulary = ["dog", "Dog", "biscuit", "lisbon", "the", "cello", "river", "blue", "sky"]
    texts = [" ".join(rng.choice(vocabulary, int(rng.integers(1, 12)))) for _ in range(300)]
    index = ScopeIndex(4)
    vector = np.full(4, 0.5, dtype=np.float32)
    index.extend((seq, Remembered("user", text, 0), vector) for seq, text in enumerate(texts))
    for query in ("dog", "the biscuit of lisbon", "sky river blue dog", "nothing here", "the"):
        assert np.allclose(index.keyword_scores(query), keyword_scores(query, texts))


async def test_an_anonymous_caller_s_new_conversation_is_not_searched(
    writers: list[GroupCommitWriter],
) -> None:
    """An anonymous caller's memory is of one conversation: when a turn opens it, there
    is nothing to find (rows of the same conversation id could only be left from a
    history already deleted), so no search is made; an identified caller's new
    conversation reads the memory of its others."""
    memory = PersonaMemory(MemoryStore(writers[0]), EMBEDDER)
    await remember(memory.store, ANONYMOUS, "My dog is called Biscuit.")
    await remember(memory.store, ALICE, "My dog is called Biscuit.")
    question = "What is the name of my dog Biscuit?"
    assert await memory.recall(ANONYMOUS, question, [], new=True) == ()
    assert await memory.recall(ANONYMOUS, question, []) == (
        "The user said: My dog is called Biscuit.",
    )
    assert await memory.recall(ALICE, question, [], new=True) == (
        "The user said: My dog is called Biscuit.",
    )
    shared = MemoryScope("socrates", "", "c4", shared=("hermit",))  # others' too: searched
    assert await memory.recall(shared, question, [], new=True) != ()
    await memory.aclose()


async def test_forget_by_words_needs_the_words_that_name_a_memory_only(
    writers: list[GroupCommitWriter],
) -> None:
    """``forget`` deletes the items holding every significant word of its description:
    the question words and other stop words of "where I work" name nothing, so the item
    about work goes, and an item without "work" stays."""
    memory = PersonaMemory(MemoryStore(writers[0]), EMBEDDER)
    shared = SharedMemory(memory, writers[0])
    await remember(memory.store, ALICE, "I work as a marine biologist.", "My dog is Biscuit.")
    gone = await shared.forget(ALICE, about="everything about where I work")
    assert [found.text for found in gone] == ["I work as a marine biologist."]
    assert await texts_of(memory.store, ALICE) == ["My dog is Biscuit."]
    assert await shared.forget(ALICE, about="where is it") == []  # names no memory
    await memory.aclose()
