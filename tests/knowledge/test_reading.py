"""Documents read and cut (persona_agent.knowledge.documents, .chunking): each type's text,
each bad file refused with its name and the reason, passages that overlap and never pass
the limit."""

from __future__ import annotations

import pytest

from persona_agent.errors import DocumentError, DocumentTooLargeError, UnsupportedDocumentError
from persona_agent.knowledge.chunking import chunk_pages
from persona_agent.knowledge.documents import document_type, read_document
from tests.knowledge.pdfs import pdf_of


def test_the_type_comes_from_the_suffix_then_the_media_type() -> None:
    assert document_type("notes.MD") == "text/markdown"
    assert document_type("page.htm", "application/octet-stream") == "text/html"
    assert document_type("part-0", "application/pdf") == "application/pdf"
    with pytest.raises(UnsupportedDocumentError, match=r"^sheet\.xlsx: "):
        document_type("sheet.xlsx", "application/vnd.ms-excel")


def test_html_is_read_as_its_text_without_scripts_or_styles() -> None:
    html = (
        "<html><head><title>T</title><style>p {color: red}</style></head><body>"
        "<h1>Opening hours</h1><p>We open at <b>nine</b>&nbsp;o&#39;clock.</p>"
        "<script>alert('no')</script><ul><li>Monday</li><li>Tuesday</li></ul></body></html>"
    )
    [(page, text)] = read_document("hours.html", html.encode(), "text/html")
    assert page is None
    assert "We open at nine o'clock." in text  # entities read, spaces made one
    assert "Opening hours" in text
    assert "Monday\nTuesday" in text.replace("\n\n", "\n")
    assert "alert" not in text
    assert "color" not in text
    assert "T\n" not in text


def test_a_pdf_is_read_page_by_page() -> None:
    pages = read_document("guide.pdf", pdf_of(["First page", "Second (page)"]), "application/pdf")
    assert [(number, text.strip()) for number, text in pages] == [
        (1, "First page"),
        (2, "Second (page)"),
    ]


@pytest.mark.parametrize(
    ("name", "data", "media", "reason"),
    [
        ("broken.pdf", pdf_of(["Some text"])[:80], "application/pdf", "not a readable PDF"),
        ("fake.pdf", b"GIF89a not a pdf", "application/pdf", "not a readable PDF"),
        ("latin.txt", "caf\xe9".encode("latin-1"), "text/plain", "not UTF-8"),
        ("empty.md", b"  \n\n ", "text/markdown", "no text"),
        ("blank.pdf", pdf_of([""]), "application/pdf", "no text"),
    ],
)
def test_a_bad_file_is_refused_naming_it(name: str, data: bytes, media: str, reason: str) -> None:
    with pytest.raises(DocumentError) as caught:
        read_document(name, data, media)
    assert caught.value.message.startswith(f"{name}: ")
    assert reason in caught.value.message


def test_passages_overlap_cut_at_sentences_and_keep_their_page() -> None:
    sentences = " ".join(f"Sentence number {n} says a little." for n in range(200))
    chunks = chunk_pages("long.txt", [(None, sentences), (7, "A short last page.")], size=300)
    assert all(len(chunk.text) <= 300 for chunk in chunks)
    assert [chunk.position for chunk in chunks] == list(range(len(chunks)))
    assert all(chunk.text.endswith(".") for chunk in chunks[:-2])  # cut after a sentence
    first, second = chunks[0].text, chunks[1].text
    assert second.split(" ", 3)[3][:20] in first  # the next starts within the last
    assert chunks[-1].page == 7
    assert chunks[-1].text == "A short last page."
    assert all(chunk.page is None for chunk in chunks[:-1])
    joined = " ".join(chunk.text for chunk in chunks[:-1])
    assert all(f"Sentence number {n} says" in joined for n in range(200))


def test_a_text_making_too_many_passages_is_refused_before_any_work() -> None:
    with pytest.raises(DocumentTooLargeError, match=r"^big\.txt: .*more than 3 passages"):
        chunk_pages("big.txt", [(None, "word " * 2000)], size=300, max_chunks=3)
