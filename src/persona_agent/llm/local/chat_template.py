"""Prompting a chat model through the chat template its GGUF file carries.

A GGUF file of a chat (instruction-tuned) model states how it wants a conversation
written (``tokenizer.chat_template``, a Jinja template). Such a model is given the chat
messages as they are (images included, for a model with a vision projector), the persona's
system prompt first, through that template, which llama.cpp's server applies; its answer
ends at its end-of-turn token and is passed on as it comes (:class:`PlainAnswer`). The hub
renders the template only to count the prompt's tokens, to fit the context.
The bundled base model has no template and is prompted with a transcript instead
(:mod:`persona_agent.llm.local.transcript`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from persona_agent.llm.base import message_text

__all__ = ["ChatTemplate", "PlainAnswer", "has_chat_template"]

TEMPLATE_KEY = b"tokenizer.chat_template"
_HEADER_SCAN = 64 * 1024 * 1024  # the metadata (with a 262k-token vocabulary) comes first


def has_chat_template(path: Path) -> bool:
    """Whether the GGUF file at ``path`` carries a chat template: its metadata key, looked
    for in the file's head, where GGUF keeps the metadata before the weights."""
    tail = b""
    with path.open("rb") as file:
        read = 0
        while read < _HEADER_SCAN and (block := file.read(1024 * 1024)):
            if TEMPLATE_KEY in tail + block:
                return True
            tail = block[-len(TEMPLATE_KEY) :]
            read += len(block)
    return False


class ChatTemplate:
    """The model file's chat template, rendering OpenAI-format messages (and the tools
    offered) into its prompt (through llama.cpp's server, which reads the template from
    the file), to fit them."""

    def __init__(
        self, format_messages: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], str]
    ) -> None:
        self._format = format_messages

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> str:
        """The prompt for ``messages`` (as :meth:`readable` makes them) and ``tools``, ending
        where the model's answer begins."""
        return self._format([_as_text(m) for m in messages], tools or None)

    def readable(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """``messages`` as the template takes them: system, user and assistant messages with
        text (their images kept), an assistant's tool calls and the tools' results; if the
        template refuses a system message (some do), the system text at the head of the
        first other message.

        Raises:
            RuntimeError: the template refuses them even so.
        """
        kept = [
            {key: m[key] for key in _KEPT if key in m}
            for m in messages
            if (m.get("role") in ("system", "user", "assistant") and message_text(m).strip())
            or (m.get("role") == "assistant" and m.get("tool_calls"))
            or m.get("role") == "tool"
        ]
        try:
            self.render(kept, tools)
            return kept
        except RuntimeError:  # the template's own raise_exception(), or a Jinja error
            system = "\n\n".join(message_text(m) for m in kept if m["role"] == "system")
            rest = [m for m in kept if m["role"] != "system"]
            if not system or not rest:
                raise
            rest[0] = {**rest[0], "content": _headed(system, rest[0].get("content"))}
            self.render(rest, tools)
            return rest

    def fit(
        self,
        messages: list[dict[str, Any]],
        count_tokens: Callable[[str], int],
        budget: int,
        tools: list[dict[str, Any]] | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """:meth:`readable`, the oldest turns left out until the prompt fits in ``budget``
        tokens (the system messages and the newest turn always stay: the newest message,
        with the tool calls and results after it): the messages, and the prompt's tokens."""
        kept = self.readable(messages, tools)
        while True:
            tokens = count_tokens(self.render(kept, tools))
            users = [i for i, m in enumerate(kept) if m.get("role") == "user"]
            newest = users[-1] if users else len(kept) - 1
            older = [i for i, m in enumerate(kept[:newest]) if m.get("role") != "system"]
            if tokens <= budget or not older:
                return kept, tokens
            del kept[older[0]]
            # A tool's result goes with the call it answers: none is left without it.
            while (at := _first_turn(kept)) is not None and kept[at].get("role") == "tool":
                del kept[at]


_KEPT = ("role", "content", "tool_calls", "tool_call_id", "name")
"""The fields of a message the template reads."""


def _as_text(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with its content as text (images are counted by the server, not here)."""
    return {**message, "content": message_text(message)}


def _first_turn(messages: list[dict[str, Any]]) -> int | None:
    """The index of the first message that is not a system message."""
    return next((i for i, m in enumerate(messages) if m.get("role") != "system"), None)


def _headed(head: str, content: object) -> object:
    """A message's ``content`` with the text ``head`` before it."""
    if isinstance(content, list):
        return [{"type": "text", "text": f"{head}\n\n"}, *content]
    return f"{head}\n\n{content}"


class PlainAnswer:
    """A chat model's answer as it comes (the model ends its own turn); the interface of
    :class:`~persona_agent.llm.local.answer.AnswerFilter`, which a transcript needs."""

    def __init__(self) -> None:
        self.text = ""
        self.stopped = False
        self.hold_sentences = False  # a chat model's answer needs no holding back

    def feed(self, piece: str) -> str:
        piece = piece.lstrip() if not self.text else piece
        self.text += piece
        return piece

    def finish(self, *, truncated: bool = False) -> str:
        self.stopped = True
        return ""
