"""What a message's extension metadata asks of the persona: who the user is (the user
extension) and an operation on the conversation (the conversation extension: regenerate
or continue the last answer, open with a chosen greeting), checked before any task is made
(:func:`check_extensions`) and read for the turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from a2a.types.a2a_pb2 import Message
from a2a.utils.errors import InvalidParamsError
from google.protobuf.struct_pb2 import Struct

from persona_agent.a2a.extensions import CONVERSATION_EXTENSION_URI, USER_EXTENSION_URI
from persona_agent.a2a.input import InputError
from persona_agent.errors import InvalidUserPersonaError
from persona_agent.personas.user_identity import UserPersona

__all__ = [
    "MAX_GREETING_INDEX",
    "ConversationOp",
    "check_extensions",
    "message_conversation",
    "message_user",
]

MAX_GREETING_INDEX = 10_000
"""The largest greeting index a message may name (a card has far fewer greetings)."""


@dataclass(frozen=True, slots=True)
class ConversationOp:
    """What the conversation extension asks: ``mode`` ``regenerate`` (the answer of the
    task named in ``referenceTaskIds`` again, as a new alternative) or ``continue`` (that
    answer, longer), or ``message`` (an ordinary message) with ``greeting``: the greeting
    a new conversation opens with (0: the first, k: the k-th alternate greeting)."""

    mode: Literal["message", "regenerate", "continue"] = "message"
    greeting: int | None = None
    reference: str = ""
    """The task whose answer is regenerated or continued (the message's first
    ``referenceTaskIds``)."""


def check_extensions(message: Message) -> None:
    """Refuse, before any task is made, a message whose extension metadata is malformed.

    Raises:
        InvalidParamsError: the user extension's value is not a valid user persona, or
            the conversation extension's is not a valid operation.
    """
    try:
        message_user(message)
        message_conversation(message)
    except InputError as error:
        raise InvalidParamsError(message=error.message) from None


def _value(message: Message, uri: str, shape: str) -> Struct | None:
    """The extension's value in the message's metadata, an object; ``None`` without one."""
    if uri not in message.metadata:
        return None
    value = message.metadata[uri]
    if not isinstance(value, Struct):  # a JSON object; anything else is not
        raise InputError(f"metadata[{uri!r}] must be an object: {shape}")
    return value


def message_user(message: Message) -> UserPersona | None:
    """Who the user says they are with this message: the user extension's value in its
    metadata (:data:`~persona_agent.a2a.extensions.USER_EXTENSION_URI`), or ``None``.

    Raises:
        InputError: the value is not ``{"name": ..., "description": ...}`` with a name of
            1 to 64 characters and a description of at most 2,000 (a string, optional).
    """
    value = _value(message, USER_EXTENSION_URI, '{"name": "...", "description": "..."}')
    if value is None:
        return None
    fields = {key: value[key] for key in value.keys()}  # noqa: SIM118 (a Struct: no get)
    try:
        return UserPersona.of(fields.get("name"), fields.get("description", ""))
    except InvalidUserPersonaError as error:
        raise InputError(f"metadata[{USER_EXTENSION_URI!r}]: {error.message}") from None


def message_conversation(message: Message) -> ConversationOp | None:
    """The conversation operation this message asks for (the conversation extension's
    value, :data:`~persona_agent.a2a.extensions.CONVERSATION_EXTENSION_URI`), or ``None``.

    Raises:
        InputError: the value is not ``{"op": "regenerate" | "continue"}`` with one task
            in ``referenceTaskIds``, nor ``{"greeting": k}`` (k a whole number from 0).
    """
    uri = CONVERSATION_EXTENSION_URI
    value = _value(message, uri, '{"op": "regenerate" | "continue"} or {"greeting": 0}')
    if value is None:
        return None
    where = f"metadata[{uri!r}]"
    fields = {key: value[key] for key in value.keys()}  # noqa: SIM118 (a Struct: no get)
    unknown = sorted(set(fields) - {"op", "greeting"})
    if unknown or len(fields) != 1:
        raise InputError(
            f'{where} must hold one of "op" (regenerate or continue) and "greeting" '
            f"(a greeting's index), not {', '.join(sorted(fields)) or 'nothing'}"
        )
    if "greeting" in fields:
        greeting = fields["greeting"]
        if (
            not isinstance(greeting, float)
            or not greeting.is_integer()
            or not 0 <= greeting <= MAX_GREETING_INDEX
        ):
            raise InputError(f"{where}: greeting must be a whole number from 0 (0: the first)")
        return ConversationOp(greeting=int(greeting))
    op = fields["op"]
    if op not in ("regenerate", "continue"):
        raise InputError(f'{where}: op must be "regenerate" or "continue", not {op!r}')
    if len(message.reference_task_ids) != 1:
        raise InputError(
            f"{where}: {op} names the task whose answer it takes in referenceTaskIds "
            "(exactly one: the conversation's latest task)"
        )
    mode: Literal["regenerate", "continue"] = "regenerate" if op == "regenerate" else "continue"
    return ConversationOp(mode=mode, reference=message.reference_task_ids[0])
