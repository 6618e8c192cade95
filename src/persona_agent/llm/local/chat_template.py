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
    """The model file's chat template, rendering OpenAI-format messages into its prompt
    (through llama.cpp's server, which reads the template from the file), to fit them."""

    def __init__(self, format_messages: Callable[[list[dict[str, str]]], str]) -> None:
        self._format = format_messages

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt for ``messages`` (as :meth:`readable` makes them), ending where the
        model's answer begins."""
        return self._format([{"role": m["role"], "content": message_text(m)} for m in messages])

    def readable(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` as the template takes them: system, user and assistant messages with
        text (their images kept); if the template refuses a system message (some do), the
        system text at the head of the first other message.

        Raises:
            RuntimeError: the template refuses them even so.
        """
        kept = [
            {"role": m["role"], "content": m["content"]}
            for m in messages
            if m.get("role") in ("system", "user", "assistant") and message_text(m).strip()
        ]
        try:
            self.render(kept)
            return kept
        except RuntimeError:  # the template's own raise_exception(), or a Jinja error
            system = "\n\n".join(message_text(m) for m in kept if m["role"] == "system")
            rest = [m for m in kept if m["role"] != "system"]
            if not system or not rest:
                raise
            rest[0] = {"role": rest[0]["role"], "content": _headed(system, rest[0]["content"])}
            self.render(rest)
            return rest

    def fit(
        self, messages: list[dict[str, Any]], count_tokens: Callable[[str], int], budget: int
    ) -> tuple[list[dict[str, Any]], int]:
        """:meth:`readable`, the oldest turns left out until the prompt fits in ``budget``
        tokens (the system messages and the newest message always stay): the messages, and
        the prompt's tokens."""
        kept = self.readable(messages)
        while True:
            tokens = count_tokens(self.render(kept))
            turns = [i for i, m in enumerate(kept) if m.get("role") != "system"]
            if tokens <= budget or len(turns) <= 1:
                return kept, tokens
            del kept[turns[0]]


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
