"""What a client sends, read for the persona: which parts are accepted, and the message as
text for the model."""

from __future__ import annotations

import asyncio
import json

from a2a.types.a2a_pb2 import Message, Role
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from persona_agent.errors import PersonaAgentError
from persona_agent.knowledge.turn import AttachedFile
from persona_agent.media.images import IMAGE_TYPES

__all__ = [
    "DATA_PART_CHARS",
    "DOCUMENT_FILE_TYPES",
    "INLINE_MESSAGE_BYTES",
    "READABLE_FILE_TYPES",
    "InputError",
    "attached_files",
    "check_parts",
    "data_as_text",
    "message_text",
    "message_to_text",
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
"""Media types of inline file parts taken as documents of the conversation: read, cut into
passages, and the passages relevant to each of its turns put in the prompt, cited
(docs/knowledge.md). The card declares them too."""

INLINE_MESSAGE_BYTES = 64 * 1024
"""The largest message read on the event loop; a larger one (a data part of many values:
each is converted in Python) is read in a worker thread."""

DATA_PART_CHARS = 1024 * 1024
"""The most of a data part's JSON the model is shown (characters); the rest is cut, and a
note says how much. A message is at most ``PERSONA_AGENT_MAX_MESSAGE_BYTES`` (1 MiB by
default), but its JSON can be longer: numbers are doubles (``1`` reads back as ``1.0``)."""


class InputError(PersonaAgentError):
    message = "The message has no content the persona can read"


def check_parts(message: Message, *, sees: bool = False) -> None:
    """Refuse, before any task is made, a message the persona cannot take: one that is
    not the user's, or has a part the persona cannot read. (The SDK's task builder raised
    ``ValueError`` for the first two below: an Internal error ``-32603``, a ``500`` on
    HTTP+JSON.)

    Raises:
        InvalidParamsError: the role is not ``ROLE_USER`` (a client sends the user's
            turn), or a text part is empty.
        ContentTypeNotSupportedError: a file by URL, a file of another media type,
            or a part with no content; an image (bytes or URL) when the persona does not
            see images (``sees``: its model does, :mod:`persona_agent.media.vision`).
    """
    if message.role != Role.ROLE_USER:
        raise InvalidParamsError(
            message='message.role must be ROLE_USER (v0.3: "user"): a client sends the user\'s turn'
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


async def message_text(message: Message) -> str:
    """:func:`message_to_text`, in a worker thread for a message over
    :data:`INLINE_MESSAGE_BYTES`.

    Raises:
        InputError: as :func:`message_to_text`.
    """
    if message.ByteSize() <= INLINE_MESSAGE_BYTES:
        return message_to_text(message)
    return await asyncio.to_thread(message_to_text, message)


def message_to_text(message: Message) -> str:
    """The user's message as text for the model.

    Text parts are the conversation; data parts are passed as JSON; file parts
    with inline bytes of a text type are read; images are left out (the model is shown
    them apart: a message of images alone has no text). Anything else raises
    :class:`InputError` naming the part.
    """
    pieces: list[str] = []
    images = False
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind in ("raw", "url") and part.media_type in IMAGE_TYPES:
            images = True  # shown to the model apart (persona_agent.media)
        elif kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(data_as_text(MessageToDict(part.data), index))
        elif kind == "raw" and part.media_type in READABLE_FILE_TYPES:
            try:
                text = part.raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"Part {index} ({part.filename or 'file'}) is not UTF-8"
                ) from error
            name = part.filename or "attached file"
            pieces.append(f"[{name}]\n{text}")
        elif kind == "raw" and part.media_type in DOCUMENT_FILE_TYPES:
            pieces.append(f"[attached document: {_document_name(part.filename, index)}]")
        else:
            media = part.media_type or "unknown type"
            raise InputError(
                f"Part {index} ({kind or 'empty'}, {media}) is not supported: "
                "send text, data, or inline text files"
            )
    text = "\n\n".join(piece for piece in pieces if piece.strip())
    if not text and not images:
        raise InputError()
    return text


def attached_files(message: Message) -> tuple[AttachedFile, ...]:
    """The message's documents (inline file parts of :data:`DOCUMENT_FILE_TYPES`), for the
    conversation's knowledge."""
    return tuple(
        AttachedFile(_document_name(part.filename, index), part.media_type, part.raw)
        for index, part in enumerate(message.parts)
        if part.WhichOneof("content") == "raw" and part.media_type in DOCUMENT_FILE_TYPES
    )


def _document_name(filename: str, index: int) -> str:
    return filename or f"part-{index}"


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
