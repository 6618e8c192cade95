"""What a client sends, read for the persona: which parts are accepted, and the message as
text for the model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import Message, Role
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from persona_agent.errors import PersonaAgentError
from persona_agent.knowledge.sent_documents import (
    DocumentBudget,
    SentDocument,
    document_name,
    read_sent,
    read_texts,
)
from persona_agent.knowledge.turn import AttachedFile
from persona_agent.media.images import IMAGE_TYPES, ImageLimits

__all__ = [
    "DATA_PART_CHARS",
    "DOCUMENT_FILE_TYPES",
    "INLINE_MESSAGE_BYTES",
    "MAX_MESSAGE_PARTS",
    "READABLE_FILE_TYPES",
    "InputError",
    "MessageRead",
    "PartLimits",
    "check_output_modes",
    "check_parts",
    "data_as_text",
    "read_message",
    "read_message_now",
]

READABLE_FILE_TYPES = (
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
    "application/yaml",
    "application/xml",
)
"""Media types of inline file parts that are read as text (the card declares them)."""

DOCUMENT_FILE_TYPES = ("application/pdf", "text/html")
"""Media types of inline file parts whose text is extracted (PDF pages, the text of HTML);
the card declares them too. Every document part, of these types or the text ones, is read
into the turn within the message's document budget (docs/media.md#documents)."""

INLINE_MESSAGE_BYTES = 64 * 1024
"""The largest message read on the event loop; a larger one (a data part of many values:
each is converted in Python) is read in a worker thread."""

DATA_PART_CHARS = 1024 * 1024
"""The most of a data part's JSON the model is shown (characters); the rest is cut, and a
note says how much. A message is at most ``PERSONA_AGENT_MAX_MESSAGE_BYTES`` (1 MiB by
default), but its JSON can be longer: numbers are doubles (``1`` reads back as ``1.0``)."""


MAX_MESSAGE_PARTS = 64
"""The most parts a message may have (``PERSONA_AGENT_MAX_MESSAGE_PARTS``)."""

DEFAULT_BUDGET = DocumentBudget()


@dataclass(frozen=True, slots=True)
class PartLimits:
    """What a message may hold, checked before any task is made (nothing fetched or
    decoded yet)."""

    max_parts: int = MAX_MESSAGE_PARTS
    """The most parts of any kind."""
    images: ImageLimits = field(default_factory=ImageLimits)
    """Its images': how many, and the bytes each and all of them may have."""


DEFAULT_PARTS = PartLimits()


class InputError(PersonaAgentError):
    message = "The message has no content the persona can read"


def check_parts(
    message: Message, *, sees: bool = False, limits: PartLimits = DEFAULT_PARTS
) -> None:
    """Refuse, before any task is made, a message the persona cannot take: one that is
    not the user's, has a part the persona cannot read, or holds more than ``limits``.
    (The SDK's task builder raised ``ValueError`` for the first two below: an Internal
    error ``-32603``, a ``500`` on HTTP+JSON.)

    Raises:
        InvalidParamsError: the role is not ``ROLE_USER`` (a client sends the user's
            turn), a text part is empty, or the message has more parts, image parts or
            bytes of images than ``limits`` (the limit and its setting named: nothing
            is fetched or decoded before).
        ContentTypeNotSupportedError: a file by URL, a file of another media type,
            or a part with no content; an image (bytes or URL) when the persona does not
            see images (``sees``: its model does, :mod:`persona_agent.media.vision`).
    """
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(
            message='message.role must be ROLE_USER (v0.3: "user"): a client sends the user\'s turn'
        )
    if len(message.parts) > limits.max_parts:
        raise InvalidParamsError(
            message=f"The message has {len(message.parts):,} parts: a message may have "
            f"{limits.max_parts:,} at most (PERSONA_AGENT_MAX_MESSAGE_PARTS)"
        )
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text" and not part.text:
            raise InvalidParamsError(
                message=f"Part {index} is an empty text part: send text, or leave the part out"
            )
        if kind in ("raw", "url") and part.media_type in IMAGE_TYPES:
            if sees:
                continue
            raise ContentTypeNotSupportedError(
                message=f"Part {index} ({kind}, {part.media_type}) is not supported: this "
                "persona's model does not see images"
            )
        if kind in ("text", "data") or (
            kind == "raw" and part.media_type in (*READABLE_FILE_TYPES, *DOCUMENT_FILE_TYPES)
        ):
            continue
        media = part.media_type or "no media type"
        raise ContentTypeNotSupportedError(
            message=f"Part {index} ({kind or 'empty'}, {media}) is not supported: send text, "
            "data, or inline files of " + ", ".join((*READABLE_FILE_TYPES, *DOCUMENT_FILE_TYPES))
        )
    _check_images(message, limits.images)


def _check_images(message: Message, limits: ImageLimits) -> None:
    """Refuse a message of more image parts, or more inline image bytes, than ``limits``."""
    images = [
        (index, part)
        for index, part in enumerate(message.parts)
        if part.WhichOneof("content") in ("raw", "url") and part.media_type in IMAGE_TYPES
    ]
    if len(images) > limits.per_message:
        raise InvalidParamsError(
            message=f"The message has {len(images):,} image parts: a message may have "
            f"{limits.per_message:,} at most (PERSONA_AGENT_IMAGE_MAX_PER_MESSAGE)"
        )
    total = 0
    for index, part in images:
        size = len(part.raw)  # 0 for a URL: its bytes are counted as they are fetched
        if size > limits.max_bytes:
            raise InvalidParamsError(
                message=f"Part {index} is an image of {size:,} bytes: an image may have "
                f"{limits.max_bytes:,} at most (PERSONA_AGENT_IMAGE_MAX_BYTES)"
            )
        total += size
    if total > limits.message_bytes:
        raise InvalidParamsError(
            message=f"The message's images have {total:,} bytes: a message's images may "
            f"have {limits.message_bytes:,} together at most (PERSONA_AGENT_IMAGE_MESSAGE_BYTES)"
        )


def check_output_modes(accepted: Sequence[str], offered: Sequence[str]) -> None:
    """Refuse, before any task is made, a send whose ``acceptedOutputModes`` name media
    types of which the persona answers in none (``offered``: its card's output modes):
    the answer could only be one the client said it cannot take.

    ``*/*`` and ``type/*`` match as in HTTP's ``Accept``; media type parameters and case
    are ignored. A mode that is not a media type (``text``, as early A2A samples sent)
    says nothing the hub can check, so a list holding one is taken as it is.

    Raises:
        ContentTypeNotSupportedError: every accepted mode is a media type the persona
            does not answer in.
    """
    wanted = [mode.split(";", 1)[0].strip().lower() for mode in accepted]
    if not wanted or any("/" not in mode for mode in wanted):
        return
    answers = [mode.lower() for mode in offered]
    for mode in wanted:
        kind, _, subtype = mode.partition("/")
        if mode == "*/*" or mode in answers:
            return
        if subtype == "*" and any(answer.startswith(f"{kind}/") for answer in answers):
            return
    raise ContentTypeNotSupportedError(
        message=f"acceptedOutputModes ({', '.join(accepted)}) names none of the media "
        f"types this persona answers in ({', '.join(offered)}): accept one of them"
    )


@dataclass(frozen=True, slots=True)
class MessageRead:
    """A user's message, read for the turn."""

    text: str
    """What the model reads: the text parts, the data parts as JSON, the documents' text
    (each within its share of the budget), in the parts' order."""
    documents: tuple[dict[str, Any], ...] = ()
    """The documents' ``files`` entries (name, media type, bytes, tokens, shown tokens)."""
    kept: tuple[AttachedFile, ...] = ()
    """The documents that were cut, for the conversation's knowledge (where the rest is)."""
    question: str = ""
    """With documents, the text and data parts alone (the user's own words: what memory and
    the documents are searched with); without, empty (the text is the question)."""


async def read_message(message: Message, budget: DocumentBudget = DEFAULT_BUDGET) -> MessageRead:
    """The user's message for the model (:func:`read_message_now`): its documents read
    first by the budget's reader (the hub's reader processes: no thread is held while a
    PDF is read), the rest in a worker thread when it has documents or is over
    :data:`INLINE_MESSAGE_BYTES`.

    Raises:
        InputError: as :func:`read_message_now`.
        DocumentError: a document cannot be read, or is over a limit (its part named).
    """
    sent = [
        SentDocument(index, document_name(part.filename, index), part.media_type, part.raw)
        for index, part in enumerate(message.parts)
        if part.WhichOneof("content") == "raw"
        and part.media_type in (*READABLE_FILE_TYPES, *DOCUMENT_FILE_TYPES)
    ]
    if not sent and message.ByteSize() <= INLINE_MESSAGE_BYTES:
        return read_message_now(message, budget)
    texts = await read_texts(sent, budget)
    return await asyncio.to_thread(read_message_now, message, budget, texts)


def read_message_now(
    message: Message,
    budget: DocumentBudget = DEFAULT_BUDGET,
    document_texts: Sequence[str] | None = None,
) -> MessageRead:
    """The user's message for the model (``document_texts``: its documents' text, read
    already by :func:`~persona_agent.knowledge.sent_documents.read_texts`).

    Text parts are the conversation; data parts are passed as JSON; file parts with inline
    bytes of a document type are read (:mod:`persona_agent.knowledge.sent_documents`), all
    of them within ``budget``; images are left out (the model is shown them apart: a
    message of images alone has no text). Anything else raises :class:`InputError` naming
    the part.

    Raises:
        InputError: a part of another kind, or nothing to read.
        DocumentError: a document cannot be read (its part named).
    """
    pieces: list[str | int] = []  # text, or the index of a document among ``sent``
    sent: list[SentDocument] = []
    images = False
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind in ("raw", "url") and part.media_type in IMAGE_TYPES:
            images = True  # shown to the model apart (persona_agent.media)
        elif kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(data_as_text(MessageToDict(part.data), index))
        elif kind == "raw" and part.media_type in (*READABLE_FILE_TYPES, *DOCUMENT_FILE_TYPES):
            pieces.append(len(sent))
            name = document_name(part.filename, index)
            sent.append(SentDocument(index, name, part.media_type, part.raw))
        else:
            media = part.media_type or "unknown type"
            raise InputError(
                f"Part {index} ({kind or 'empty'}, {media}) is not supported: "
                "send text, data, or inline documents"
            )
    read = read_sent(sent, budget, document_texts)
    texts = [piece if isinstance(piece, str) else read[piece].text for piece in pieces]
    text = "\n\n".join(piece for piece in texts if piece.strip())
    if not text and not images:
        raise InputError()
    own = [piece for piece in pieces if isinstance(piece, str) and piece.strip()]
    return MessageRead(
        text,
        tuple(document.entry() for document in read),
        tuple(document.kept() for document in read if document.cut),
        "\n\n".join(own) if sent else "",
    )


def data_as_text(data: object, index: int, limit: int = DATA_PART_CHARS) -> str:
    """A data part for the model: compact JSON in a fenced block, at most ``limit``
    characters of it, with a note saying what was cut. Linear in the data: indented JSON of
    a deeply nested part was 30 times its size (a 1 MB part nested 45 deep became 31 MB,
    and 16 seconds of the event loop)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    note = ""
    if len(text) > limit:
        note = (
            f"\n[data part {index}: cut here, after {limit:,} of its {len(text):,} characters "
            "of JSON]"
        )
        text = text[:limit]
    return "```json\n" + text + "\n```" + note
