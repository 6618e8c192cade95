"""The documents a message brings, read into its turn: each one's text, within a token
budget the message's documents share, with a note where one is cut (docs/media.md#documents).

A document that fits is shown whole; the budget is shared fairly: a document smaller than
an equal share is shown whole, and what it leaves over goes to the others, each of the
larger ones getting the same share. A cut document is shown from its start, cut at a
line's or word's end, and a note after it says how much was shown; such a document is
also kept as the conversation's knowledge document, so that its passages are looked up in
the turns that ask about them (:mod:`persona_agent.knowledge.library`).

Reading is CPU work on untrusted bytes: :func:`read_texts` reads the documents by the
budget's reader (the hub's reader processes: :mod:`persona_agent.knowledge.reader_pool`),
one after the other, and :func:`read_sent` shares the budget among their texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from persona_agent.errors import DocumentError
from persona_agent.knowledge.documents import DEFAULT_LIMITS, ReadLimits, read_document
from persona_agent.knowledge.reader_pool import READ_IN_THREAD, DocumentReader
from persona_agent.knowledge.turn import AttachedFile

__all__ = [
    "DocumentBudget",
    "ReadDocument",
    "SentDocument",
    "document_name",
    "estimate_tokens",
    "fair_shares",
    "read_sent",
    "read_texts",
]


def estimate_tokens(text: str) -> int:
    """Characters / 4, rounded up: memory's and the lorebook's rule (no tokenizer fits every
    model), written here so that reading a message loads nothing of memory's (numpy)."""
    return -(-len(text) // 4)


def document_name(filename: str, index: int) -> str:
    """How a document part is named to the model and in ``files``: its file's own name (no
    directories), printable, brackets made parentheses (so that no name can write a line
    of the frame around a document), at most 255 characters; ``part-{index}`` without one."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip()
    base = base.replace("[", "(").replace("]", ")")
    return base[:255] or f"part-{index}"


@dataclass(frozen=True, slots=True)
class SentDocument:
    """A document part of a message: its place among the parts (from 0), its file name
    (``part-{index}`` when it has none), its media type and bytes."""

    index: int
    name: str
    media_type: str
    data: bytes

    @property
    def label(self) -> str:
        """How an error names it: ``Part 1 (report.pdf)``."""
        return f"Part {self.index} ({self.name})"


@dataclass(frozen=True, slots=True)
class DocumentBudget:
    """The tokens (characters / 4) of documents one message may show the model, all its
    documents together, what reading one may cost, and who reads them (the hub: its reader
    processes)."""

    tokens: int = 8000
    limits: ReadLimits = DEFAULT_LIMITS
    reader: DocumentReader = READ_IN_THREAD


@dataclass(frozen=True, slots=True)
class ReadDocument:
    """A document read into the turn: the text the model reads (its header, what is shown,
    the closing line or the note of the cut), and its ``files`` entry."""

    sent: SentDocument
    text: str
    tokens: int
    """The whole document's text, in tokens (characters / 4)."""
    shown_tokens: int
    """What the model is shown of it, in tokens."""

    @property
    def cut(self) -> bool:
        return self.shown_tokens < self.tokens

    def entry(self) -> dict[str, Any]:
        """The stored user message's ``files`` entry (docs/media.md#documents)."""
        sent = self.sent
        return {
            "name": sent.name,
            "mediaType": sent.media_type,
            "bytes": len(sent.data),
            "tokens": self.tokens,
            "shownTokens": self.shown_tokens,
        }

    def kept(self) -> AttachedFile:
        """The document, for the conversation's knowledge."""
        sent = self.sent
        return AttachedFile(sent.name, sent.media_type, sent.data)


async def read_texts(documents: Sequence[SentDocument], budget: DocumentBudget) -> list[str]:
    """Each document's text, read by ``budget.reader`` one after the other (a message's
    documents take one reader at a time; a canceled task's reading stops).

    Raises:
        DocumentError: a document cannot be read, or is over a limit (its part named).
    """
    texts: list[str] = []
    for document in documents:
        try:
            pages = await budget.reader.read(
                document.label, document.data, document.media_type, budget.limits
            )
        except DocumentError as error:
            raise DocumentError(error.message) from None
        texts.append(_joined(pages))
    return texts


def read_sent(
    documents: Sequence[SentDocument],
    budget: DocumentBudget,
    texts: Sequence[str] | None = None,
) -> list[ReadDocument]:
    """Each document shown within ``budget`` (see the module), in their order: ``texts``,
    as :func:`read_texts` read them, or read here (in this thread) when not given.

    Raises:
        DocumentError: a document cannot be read (its part named: ``Part 1 (report.pdf):
            the PDF is encrypted: ...``).
    """
    if texts is None:
        texts = [_text_of(document, budget.limits) for document in documents]
    sizes = [estimate_tokens(text) for text in texts]
    shares = fair_shares(sizes, budget.tokens)
    read: list[ReadDocument] = []
    for document, text, size, share in zip(documents, texts, sizes, shares, strict=True):
        shown = text if share >= size else _cut(text, share * 4)
        shown_tokens = size if shown is text else estimate_tokens(shown)
        read.append(
            ReadDocument(
                document, _framed(document.name, shown, shown_tokens, size), size, shown_tokens
            )
        )
    return read


def _text_of(document: SentDocument, limits: ReadLimits) -> str:
    try:
        pages = read_document(document.label, document.data, document.media_type, limits)
    except DocumentError as error:
        raise DocumentError(error.message) from None
    return _joined(pages)


def _joined(pages: Sequence[tuple[int | None, str]]) -> str:
    return "\n\n".join(text.strip() for _, text in pages if text.strip())


def fair_shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Each size's share of ``budget``: a size within an equal share of what is left gets
    all it needs, the larger ones an equal share of the rest (the smallest served first)."""
    shares = [0] * len(sizes)
    left, waiting = budget, len(sizes)
    for index in sorted(range(len(sizes)), key=lambda i: sizes[i]):
        share = min(sizes[index], left // waiting)
        shares[index] = share
        left -= share
        waiting -= 1
    return shares


def _cut(text: str, chars: int) -> str:
    """The start of ``text``, at most ``chars`` characters, ended at a line's end, else a
    word's, when one is in its last fifth."""
    if chars <= 0:
        return ""
    head = text[:chars]
    for mark in ("\n", " "):
        end = head.rfind(mark)
        if end >= chars * 4 // 5:
            return head[:end].rstrip()
    return head


def _framed(name: str, shown: str, shown_tokens: int, tokens: int) -> str:
    """The document as the model reads it (docs/media.md#documents)."""
    if shown_tokens >= tokens:
        return f"[document: {name}]\n{shown}\n[end of {name}]"
    note = (
        f"[{name} is cut here: {shown_tokens:,} of its {tokens:,} tokens shown. The whole "
        "document is kept with this conversation: passages of the rest that a message asks "
        "about are looked up]"
    )
    return f"[document: {name}]\n{shown}\n{note}" if shown else f"[document: {name}]\n{note}"
