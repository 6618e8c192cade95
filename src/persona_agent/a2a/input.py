"""What a client sends, read for the persona: which parts are accepted, and the message as
text for the model."""

from __future__ import annotations

import json

from a2a.types.a2a_pb2 import Message, Role
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from persona_agent.errors import PersonaAgentError

__all__ = ["READABLE_FILE_TYPES", "InputError", "check_parts", "message_to_text"]

READABLE_FILE_TYPES = (
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
    "application/yaml",
    "application/xml",
)
"""Media types of inline file parts that are read as text (the card declares them)."""


class InputError(PersonaAgentError):
    message = "The message has no content the persona can read"


def check_parts(message: Message) -> None:
    """Refuse, before any task is made, a message the persona cannot take: one that is
    not the user's, or has a part the persona cannot read. (The SDK's task builder raised
    ``ValueError`` for the first two below: an Internal error ``-32603``, a ``500`` on
    HTTP+JSON.)

    Raises:
        InvalidParamsError: the role is not ``ROLE_USER`` (a client sends the user's
            turn), or a text part is empty.
        ContentTypeNotSupportedError: a file by URL, a file of another media type,
            or a part with no content.
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
        if kind in ("text", "data") or (kind == "raw" and part.media_type in READABLE_FILE_TYPES):
            continue
        media = part.media_type or "no media type"
        raise ContentTypeNotSupportedError(
            message=f"Part {index} ({kind or 'empty'}, {media}) is not supported: send text, "
            "data, or inline files of " + ", ".join(READABLE_FILE_TYPES)
        )


def message_to_text(message: Message) -> str:
    """The user's message as text for the model.

    Text parts are the conversation; data parts are passed as JSON; file parts
    with inline bytes of a text type are read. Anything else raises
    :class:`InputError` naming the part.
    """
    pieces: list[str] = []
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            data = MessageToDict(part.data)
            pieces.append("```json\n" + json.dumps(data, ensure_ascii=False, indent=2) + "\n```")
        elif kind == "raw" and part.media_type in READABLE_FILE_TYPES:
            try:
                text = part.raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(
                    f"Part {index} ({part.filename or 'file'}) is not UTF-8"
                ) from error
            name = part.filename or "attached file"
            pieces.append(f"[{name}]\n{text}")
        else:
            media = part.media_type or "unknown type"
            raise InputError(
                f"Part {index} ({kind or 'empty'}, {media}) is not supported: "
                "send text, data, or inline text files"
            )
    text = "\n\n".join(piece for piece in pieces if piece.strip())
    if not text:
        raise InputError()
    return text
