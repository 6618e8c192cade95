"""Documents taken in, searched, listed and deleted (persona_agent.knowledge.library and
.store) on a real database: SQLite, and PostgreSQL when one answers. A file that cannot be
taken leaves the store as it was; a conversation's document is found in that
conversation only; the passage that answers a question is the one found."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from persona_agent.db import GroupCommitWriter
from persona_agent.errors import (
    DocumentError,
    DocumentLimitError,
    DocumentNotFoundError,
    DocumentTooLargeError,
    UnsupportedDocumentError,
)
from persona_agent.knowledge.document_store import KnowledgeStore, StoredPassage
from persona_agent.knowledge.library import Knowledge, KnowledgeLimits
from persona_agent.knowledge.turn import AttachedFile
from persona_agent.memory.embeddings import HashingEmbedder
from tests.knowledge.pdfs import pdf_of

GUIDE = """# The lighthouse keeper's guide

## Lamps
The lamp is lit at sunset and put out at sunrise. Its wick is trimmed every evening.

## Fog
In fog the horn sounds twice every minute, and the keeper writes the hours in the log.

## Supplies
Oil arrives by boat on the first Monday of each month; the keeper signs for forty litres.
"""


def knowledge(writer: GroupCommitWriter, **limits: int) -> Knowledge:
    values: dict[str, Any] = {"chunk_chars": 200, "chunk_overlap": 30, "max_passages": 2}
    return Knowledge(KnowledgeStore(writer), HashingEmbedder, KnowledgeLimits(**values | limits))


async def everything(writer: GroupCommitWriter, persona_id: str) -> tuple[object, ...]:
    store = KnowledgeStore(writer)
    return (
        await store.documents(persona_id),
        await store.passages(persona_id, "any conversation"),
    )


async def test_the_passage_that_answers_is_found_and_cited(writer: GroupCommitWriter) -> None:
    library = knowledge(writer)
    document = await library.add("keeper", "guide.md", GUIDE.encode())
    assert (document.name, document.media_type, document.source) == (
        "guide.md",
        "text/markdown",
        "upload",
    )
    assert document.chunks >= 2
    found = await library.for_turn("keeper", "c1", "How much oil does the boat bring?")
    assert "forty litres" in found[0].text
    assert found[0].citation() == {
        "document": "guide.md",
        "documentId": document.id,
        "passage": found[0].position + 1,
    }
    assert len(found) <= 2
    assert await library.for_turn("other-persona", "c1", "How much oil?") == ()


async def test_a_pdf_passage_is_cited_with_its_page(writer: GroupCommitWriter) -> None:
    library = knowledge(writer)
    pdf = pdf_of(["Welcome to the museum.", "The west wing closes at five for cleaning."])
    await library.add("guide", "museum.pdf", pdf)
    [best, *_] = await library.for_turn("guide", "c", "When does the west wing close?")
    assert best.page == 2
    assert "five" in best.text
    assert best.where() == "museum.pdf, page 2, passage 2"


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("sheet.xlsx", b"PK\x03\x04", UnsupportedDocumentError),
        ("broken.pdf", b"%PDF-1.4\n1 0 obj <<", DocumentError),
        ("huge.txt", b"x " * 600, DocumentTooLargeError),
        ("wordy.txt", b"word " * 100, DocumentTooLargeError),
    ],
)
async def test_a_bad_file_stores_nothing(
    writer: GroupCommitWriter, name: str, data: bytes, error: type[DocumentError]
) -> None:
    library = knowledge(writer, max_bytes=1000, max_chunks=2)
    await library.add("keeper", "guide.md", GUIDE.encode()[:300])
    before = await everything(writer, "keeper")
    with pytest.raises(error) as caught:
        await library.add("keeper", name, data)
    assert caught.value.message.startswith(f"{name}: ")
    assert await everything(writer, "keeper") == before


async def test_the_limits_of_a_persona_are_kept(writer: GroupCommitWriter) -> None:
    library = knowledge(writer, max_documents=2, max_persona_chunks=5)
    await library.add("keeper", "a.txt", b"Alpha text.")
    await library.add("keeper", "b.txt", b"Beta text.")
    before = await everything(writer, "keeper")
    with pytest.raises(DocumentLimitError, match=r"^c\.txt: persona 'keeper' has 2 documents"):
        await library.add("keeper", "c.txt", b"Gamma text.")
    replaced = await library.add("keeper", "b.txt", b"Beta text, second edition.")  # same name
    names = [(d.name, d.id) for d in await library.documents("keeper")]
    assert names == [("a.txt", before[0][0].id), ("b.txt", replaced.id)]  # type: ignore[index]
    with pytest.raises(DocumentLimitError, match="passages"):
        await library.add("keeper", "b.txt", ("Many sentences here. " * 60).encode())
    assert [d.id for d in await library.documents("keeper")] == [n[1] for n in names]


async def test_a_conversation_document_is_read_in_that_conversation_only(
    writer: GroupCommitWriter,
) -> None:
    library = knowledge(writer)
    files = [AttachedFile("notes.html", "text/html", b"<p>The vault code is 4711.</p>")]
    found = await library.for_turn("keeper", "mine", "What is the vault code?", files)
    assert [p.name for p in found] == ["notes.html"]
    assert "4711" in found[0].text
    again = await library.for_turn("keeper", "mine", "Remind me of the vault code")
    assert "4711" in again[0].text
    assert await library.for_turn("keeper", "theirs", "What is the vault code?") == ()
    assert await library.documents("keeper") == []  # not one of the persona's own


async def test_delete_and_forget(writer: GroupCommitWriter) -> None:
    library = knowledge(writer)
    kept = await library.add("keeper", "guide.md", GUIDE.encode())
    gone = await library.add("keeper", "old.txt", b"The old lamp burned whale oil.")
    await library.delete("keeper", gone.id)
    assert [d.id for d in await library.documents("keeper")] == [kept.id]
    assert all(p.document_id == kept.id for p in await library.store.passages("keeper", ""))
    with pytest.raises(DocumentNotFoundError):
        await library.delete("keeper", gone.id)
    with pytest.raises(DocumentNotFoundError):
        await library.delete("another", kept.id)  # another persona's id: not found
    await library.for_turn("keeper", "c", "hi", [AttachedFile("x.html", "text/html", b"<p>x</p>")])
    await library.store.forget_persona("keeper")
    assert await everything(writer, "keeper") == ([], [])
    assert await library.store.passages("keeper", "c") == []


async def test_files_of_one_message_are_stored_all_or_none(writer: GroupCommitWriter) -> None:
    library = knowledge(writer, max_documents=2)
    files = [
        AttachedFile(f"{name}.html", "text/html", f"<p>{name} text</p>".encode())
        for name in ("one", "two", "three")
    ]
    with pytest.raises(DocumentLimitError, match=r"^three\.html: the conversation has 2"):
        await library.for_turn("keeper", "c", "hello", files)
    assert await library.store.passages("keeper", "c") == []
    with pytest.raises(DocumentError, match=r"^bad\.pdf: "):
        await library.for_turn(
            "keeper", "c", "hello", [files[0], AttachedFile("bad.pdf", "application/pdf", b"x")]
        )
    assert await library.store.passages("keeper", "c") == []


async def test_a_document_added_after_a_search_is_found_at_the_next(
    writer: GroupCommitWriter,
) -> None:
    """A hub alone on its database keeps which personas have documents: one added after
    that was read must be searched from then on."""
    library = knowledge(writer)
    assert await library.for_turn("keeper", "c", "How much oil does the boat bring?") == ()
    await library.add("keeper", "guide.md", GUIDE.encode())
    found = await library.for_turn("keeper", "c", "How much oil does the boat bring?")
    assert "forty litres" in found[0].text


async def test_passages_of_another_embedder_are_re_embedded_and_found(
    writer: GroupCommitWriter,
) -> None:
    """A hub whose embedder changed (hashing was the default before wordllama) does not
    lose its documents: their passages are re-embedded in the background, then found."""
    before = knowledge(writer)
    document = await before.add("keeper", "guide.md", GUIDE.encode())
    question = "How much oil does the boat bring?"
    after = Knowledge(
        KnowledgeStore(writer),
        lambda: HashingEmbedder(dimensions=128),  # another vector space
        KnowledgeLimits(chunk_chars=200, chunk_overlap=30, max_passages=2),
    )
    assert await after.for_turn("keeper", "c1", question) == ()  # not comparable yet
    assert after.reembedder is not None  # started by that search, in the background
    while await after.reembedder.step():  # the background's steps, here without pauses
        pass
    found = await after.for_turn("keeper", "c1", question)
    assert "forty litres" in found[0].text
    passages = await after.store.passages("keeper", "c1")
    assert {passage.model for passage in passages} == {"hashing-128"}
    assert len(passages) == document.chunks
    await after.aclose()


class _CountedReads(KnowledgeStore):
    """The real store, counting the passage reads a turn makes."""

    reads = 0

    async def passages(self, persona_id: str, conversation: str) -> list[StoredPassage]:
        self.reads += 1
        return await super().passages(persona_id, conversation)


@pytest.mark.parametrize("shared", [False, True], ids=["alone", "replicas"])
async def test_a_turn_of_a_persona_without_documents_reads_none_on_a_hub_alone(
    writer: GroupCommitWriter, shared: bool
) -> None:
    """(docs/knowledge.md) A hub alone on its database knows which personas have documents:
    a turn of one without reads no passages; replicas, where another process may add one,
    read at every turn. A first search and a first document at once lose neither."""
    store = _CountedReads(writer)
    library = Knowledge(store, HashingEmbedder, KnowledgeLimits(chunk_chars=200), shared=shared)
    question = "How much oil does the boat bring?"
    await asyncio.gather(
        library.for_turn("keeper", "c", question), library.add("keeper", "g.md", GUIDE.encode())
    )
    before = store.reads
    assert await library.for_turn("nobody", "c", question) == ()
    assert store.reads == before + shared
    found = await library.for_turn("keeper", "c", question)
    assert "forty litres" in found[0].text
