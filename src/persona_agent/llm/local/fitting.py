"""The prompt of one turn as the embedded model reads it, fitted to its context, and a
persona's fixed prefix in the tokens the server reads (the server counts them: its
``/tokenize``). Blocking calls, a worker thread's.

The text of cards, users and tools in it is made inert against the model's special
tokens first (:mod:`persona_agent.llm.local.special_tokens`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from persona_agent.errors import LLMError
from persona_agent.llm.local.chat_template import ChatTemplate
from persona_agent.llm.local.prefixes import prefix_of
from persona_agent.llm.local.server import EmbeddedServer
from persona_agent.llm.local.special_tokens import SpecialText
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
    specials: SpecialText,
    tools: list[dict[str, Any]] | None = None,
) -> FittedPrompt:
    """The turn's assembly as this model reads it, within ``budget`` tokens: the chat
    ``messages`` (their images included) and the ``tools`` offered through its chat
    ``template``, or with none ``sections`` as a transcript in one message (read through
    the pass-through template). No text in it reads as one of the model's ``specials``.

    Raises:
        LLMError: even the newest message alone does not fit.
    """
    count = _counter(server, special=template is not None)
    if template is not None:
        messages, tokens = template.fit(specials.inert_messages(messages), count, budget, tools)
    else:
        transcript = _transcript(sections, count, budget, specials)
        messages, tokens = [{"role": "user", "content": transcript}], count(transcript)
    if tokens > budget:
        raise LLMError(
            f"The message is too long for the local model ({tokens} tokens "
            f"of context; at most {budget})"
        )
    return FittedPrompt(messages, tokens)


def prefix_tokens(
    server: EmbeddedServer,
    template: ChatTemplate | None,
    sections: PromptSections,
    budget: int,
    specials: SpecialText,
) -> list[int] | None:
    """The fixed part of a new conversation's prompt (``sections`` made by
    :func:`~persona_agent.llm.local.prefixes.new_conversation`) as the server reads it, in
    tokens, its text made inert as :func:`fitted_prompt` makes it; None when it has none."""
    special = template is not None
    count = _counter(server, special=special)
    if template is not None:
        messages, _ = template.fit(specials.inert_messages(sections.messages()), count, budget)
        prompt: str | None = template.render(messages)
    else:
        prompt = _transcript(sections, count, budget, specials)
    prefix = prefix_of(prompt) if prompt else None
    if not prefix:
        return None
    tokens = server.tokenize(prefix, special=special)
    if len(tokens) > 1 and tokens[0] == tokens[1]:
        del tokens[0]  # the template wrote the BOS token itself
    return tokens


def _transcript(
    sections: PromptSections, count: Callable[[str], int], budget: int, specials: SpecialText
) -> str:
    """The transcript of ``sections`` within ``budget``, made inert: all its text is the
    card's, the users' and the tools' (the server adds the BOS token)."""

    def inert_count(text: str) -> int:
        return count(specials.inert(text))

    return specials.inert(build_prompt(sections, count_tokens=inert_count, budget=budget))


def _counter(server: EmbeddedServer, *, special: bool) -> Callable[[str], int]:
    """Counts a text's tokens as the server reads it (a template that writes the BOS token
    itself: the server reads one)."""

    def count(text: str) -> int:
        tokens = server.tokenize(text, special=special)
        return len(tokens) - 1 if len(tokens) > 1 and tokens[0] == tokens[1] else len(tokens)

    return count
