"""The prompt of one turn as the embedded model reads it, fitted to its context, and a
persona's fixed prefix in the tokens the server reads (the server counts them: its
``/tokenize``). Blocking calls, a worker thread's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from persona_agent.errors import LLMError
from persona_agent.llm.local.chat_template import ChatTemplate
from persona_agent.llm.local.prefixes import prefix_of
from persona_agent.llm.local.server import EmbeddedServer
from persona_agent.llm.local.transcript import build_prompt
from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["FittedPrompt", "fitted_prompt", "prefix_tokens"]


@dataclass(frozen=True, slots=True)
class FittedPrompt:
    """What the server reads for one answer: its messages, and their tokens."""

    messages: list[dict[str, Any]]
    tokens: int


def fitted_prompt(
    server: EmbeddedServer,
    template: ChatTemplate | None,
    sections: PromptSections,
    messages: list[dict[str, Any]],
    budget: int,
) -> FittedPrompt:
    """The turn's assembly as this model reads it, within ``budget`` tokens: the chat
    ``messages`` (their images included) through its chat ``template``, or with none
    ``sections`` as a transcript in one message (read through the pass-through template).

    Raises:
        LLMError: even the newest message alone does not fit.
    """
    count = _counter(server, special=template is not None)
    if template is not None:
        messages, tokens = template.fit(messages, count, budget)
    else:
        transcript = build_prompt(sections, count_tokens=count, budget=budget)
        messages, tokens = [{"role": "user", "content": transcript}], count(transcript)
    if tokens > budget:
        raise LLMError(
            f"The message is too long for the local model ({tokens} tokens "
            f"of context; at most {budget})"
        )
    return FittedPrompt(messages, tokens)


def prefix_tokens(
    server: EmbeddedServer, template: ChatTemplate | None, sections: PromptSections, budget: int
) -> list[int] | None:
    """The fixed part of a new conversation's prompt (``sections`` made by
    :func:`~persona_agent.llm.local.prefixes.new_conversation`) as the server reads it, in
    tokens; None when it has none."""
    special = template is not None
    count = _counter(server, special=special)
    if template is not None:
        messages, _ = template.fit(sections.messages(), count, budget)
        prompt: str | None = template.render(messages)
    else:
        prompt = build_prompt(sections, count_tokens=count, budget=budget)
    prefix = prefix_of(prompt) if prompt else None
    if not prefix:
        return None
    tokens = server.tokenize(prefix, special=special)
    if len(tokens) > 1 and tokens[0] == tokens[1]:
        del tokens[0]  # the template wrote the BOS token itself
    return tokens


def _counter(server: EmbeddedServer, *, special: bool) -> Callable[[str], int]:
    """Counts a text's tokens as the server reads it (a template that writes the BOS token
    itself: the server reads one)."""

    def count(text: str) -> int:
        tokens = server.tokenize(text, special=special)
        return len(tokens) - 1 if len(tokens) > 1 and tokens[0] == tokens[1] else len(tokens)

    return count
