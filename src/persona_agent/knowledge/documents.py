"""A document's text: plain text, Markdown, CSV, JSON, YAML, XML, HTML or PDF read into
pages of text.

Reading is CPU work on untrusted bytes: callers run :func:`read_document` in a worker
thread. A PDF is read within :class:`ReadLimits` (pages, bytes its streams decode to: a
"PDF bomb" of a small stream that inflates to gigabytes is refused, not inflated). Every
failure is a :class:`~persona_agent.errors.DocumentError` naming the file and the reason,
raised before anything is stored.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any

from persona_agent.errors import DocumentError, UnsupportedDocumentError

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


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """What reading one PDF may cost: its pages, and the bytes its content streams decode
    to, all pages together (each stream is also stopped at that size while it inflates)."""

    max_pages: int = 500
    max_decoded_bytes: int = 32 * 1024 * 1024


DEFAULT_LIMITS = ReadLimits()


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
        pages = _pdf_pages(name, data, limits)
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


def _pdf_pages(name: str, data: bytes, limits: ReadLimits) -> list[tuple[int | None, str]]:
    """Each page's text, by pypdf (imported here: only a hub given a PDF loads it)."""
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError, PyPdfError

    # pypdf logs each repair it makes of a damaged file at WARNING: a caller's file is
    # not the hub's problem, and the outcome is told to the caller.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    too_big = (
        f"{name}: the PDF's content decodes to more than {limits.max_decoded_bytes:,} bytes "
        "(PERSONA_AGENT_DOCUMENT_MAX_DECODED_BYTES)"
    )
    try:
        with _pdf_limits(limits.max_decoded_bytes):
            reader = PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted:
                raise DocumentError(f"{name}: the PDF is encrypted: send it without a password")
            count = len(reader.pages)
            if count > limits.max_pages:
                raise DocumentError(
                    f"{name}: {count:,} pages, over the limit of {limits.max_pages:,} "
                    "(PERSONA_AGENT_DOCUMENT_MAX_PAGES)"
                )
            pages: list[tuple[int | None, str]] = []
            decoded = 0
            for number, page in enumerate(reader.pages, 1):
                contents = page.get_contents()  # decoded once: extract_text reuses it
                decoded += len(contents.get_data()) if contents is not None else 0
                if decoded > limits.max_decoded_bytes:
                    raise DocumentError(too_big)
                pages.append((number, page.extract_text() or ""))
            return pages
    except DocumentError:
        raise
    except LimitReachedError:
        raise DocumentError(too_big) from None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
        # pypdf raises more than its own errors on a damaged file.
        raise DocumentError(f"{name}: not a readable PDF ({type(error).__name__})") from None


@contextmanager
def _pdf_limits(decoded_bytes: int) -> Iterator[Any]:
    """pypdf's own decompression limits, lowered to ``decoded_bytes`` for this thread's
    reading (a context variable: other readings keep theirs; ``apply_configuration`` is
    pypdf 7's, the version pyproject.toml asks for)."""
    import pypdf

    with pypdf.apply_configuration(
        zlib_maximum_output_length=decoded_bytes,
        lzw_maximum_output_length=decoded_bytes,
        run_length_maximum_output_length=decoded_bytes,
        brotli_maximum_output_length=decoded_bytes,
        array_based_stream_maximum_output_length=decoded_bytes,
        maximum_declared_stream_length=decoded_bytes,
        image_maximum_buffer_size=decoded_bytes,
    ) as configuration:
        yield configuration


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
