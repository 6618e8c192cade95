"""A document's text: plain text, Markdown, CSV, JSON, YAML, XML, HTML or PDF read into
pages of text.

Reading is CPU work on untrusted bytes: the hub reads documents in processes of their own
(:mod:`persona_agent.knowledge.reader_pool`). A PDF is read within :class:`ReadLimits`
(pages, bytes its streams decode to, operators, characters, CPU seconds:
:mod:`persona_agent.knowledge.pdf_text`): a "PDF bomb" of a small stream that inflates to
gigabytes is refused, not inflated. Every failure is a
:class:`~persona_agent.errors.DocumentError` naming the file and the reason, raised before
anything is stored.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import PurePath

from persona_agent.errors import DocumentError, UnsupportedDocumentError
from persona_agent.knowledge.pdf_text import DEFAULT_LIMITS, ReadLimits, pdf_pages

__all__ = ["DEFAULT_LIMITS", "DOCUMENT_TYPES", "ReadLimits", "document_type", "read_document"]

DOCUMENT_TYPES = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".xml": "application/xml",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}
"""The documents read, by file suffix, and the media type of each."""

_MEDIA_ALIASES = {
    "application/xhtml+xml": "text/html",
    "application/x-pdf": "application/pdf",
    "text/xml": "application/xml",
    "application/x-yaml": "application/yaml",
    "text/yaml": "application/yaml",
}


def document_type(name: str, media_type: str | None = None) -> str:
    """The media type a document is read as: its suffix's, else the media type given
    (a file part may carry no suffix).

    Raises:
        UnsupportedDocumentError: neither names a type the hub reads.
    """
    by_suffix = DOCUMENT_TYPES.get(PurePath(name).suffix.lower())
    if by_suffix is not None:
        return by_suffix
    media = (media_type or "").split(";")[0].strip().lower()
    media = _MEDIA_ALIASES.get(media, media)
    if media in DOCUMENT_TYPES.values():
        return media
    raise UnsupportedDocumentError(
        f"{name}: {media or 'no'} type is not read as a document: send text (.txt), "
        "Markdown (.md), CSV (.csv), JSON (.json), YAML (.yaml), XML (.xml), HTML (.html) "
        "or PDF (.pdf)"
    )


def read_document(
    name: str, data: bytes, media_type: str, limits: ReadLimits = DEFAULT_LIMITS
) -> list[tuple[int | None, str]]:
    """The document's text as (page, text) pairs: one per PDF page (numbered from 1),
    one with no page for the other types.

    Raises:
        DocumentError: the bytes are not what the type says (not UTF-8, a corrupt PDF, an
            encrypted one), they hold no text, or a PDF is over ``limits``.
    """
    if media_type == "application/pdf":
        pages = pdf_pages(name, data, limits)
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise DocumentError(
                f"{name}: not UTF-8 text (byte {error.start}): save it as UTF-8"
            ) from None
        pages = [(None, _html_text(text) if media_type == "text/html" else text)]
    if not any(text.strip() for _, text in pages):
        raise DocumentError(f"{name}: the document has no text to read")
    return pages


_BLOCKS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "footer",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "td",
        "th",
        "tr",
        "ul",
    ]
)
_BLANK_LINES = re.compile(r"\n{3,}")
_SKIPPED = frozenset({"script", "style", "template", "noscript", "head"})


class _TextOfHtml(HTMLParser):
    """The text a reader sees: scripts and styles left out, a block element a new line."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag in _BLOCKS:
            self.pieces.append("\n\n" if tag in ("p", "div", "section", "article") else "\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCKS:
            self.pieces.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.pieces.append(data)


def _html_text(html: str) -> str:
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.pieces).split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
