"""The embedded model's answer made from the server's stream of chunks.

:class:`AnswerStream`: a base model's answer cleaned as it streams
(:mod:`persona_agent.llm.local.answer`), a chat model's passed on (its tool calls one at a
time), an empty answer sampled again, warmer, then a fallback line, and the usage in the
last chunk, in the OpenAI chunks' shape the backend relays."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from persona_agent.llm.base import ChatRequest, Usage
from persona_agent.llm.local.answer import AnswerFilter, fallback_line, has_words, speaker_names
from persona_agent.llm.local.chat_template import PlainAnswer
from persona_agent.llm.local.fitting import FittedPrompt
from persona_agent.llm.local.loading import Ready
from persona_agent.llm.local.transcript import continued, stop_strings
from persona_agent.llm.stream_chunks import Chunk
from persona_agent.personas.turn_prompt import PromptSections

__all__ = ["AnswerStream"]

logger = logging.getLogger(__name__)

RETRY_TEMPERATURE_STEP = 0.3
SENTENCE_TAIL = 24  # in the last tokens before the cap, sentences are held until they end
NEWLINES = ["\n", "\n\n", "\n\n\n"]  # Gemma's tokenizer has a token for each


class AnswerStream:
    """Answers of at most ``max_tokens`` (a request's own cap below it), sampled with
    ``seed`` (the retry's with the next one; None: the server's); counts the tokens it
    :attr:`generated` and the prompt tokens the server found :attr:`reused`."""

    def __init__(self, *, max_tokens: int, seed: int | None) -> None:
        self.max_tokens = max_tokens
        self.seed = seed
        self.generated = 0
        self.reused = 0

    async def chunks(
        self,
        ready: Ready,
        prompt: FittedPrompt,
        request: ChatRequest,
        sections: PromptSections,
        messages: list[dict[str, object]],
    ) -> AsyncGenerator[Chunk, None]:
        """The answer as the server's stream of chunks, cleaned: sampled once more, warmer,
        if the first is empty, then a fallback line; usage in the last chunk."""
        names = (*speaker_names(sections.name), *speaker_names(sections.user))
        after = "" if ready.template else continued(sections) or ""
        stop = [*(request.stop or ()), *stop_strings(sections)]
        temperature = request.temperature or 0.0
        produced = cached = 0
        finish = "stop"
        for attempt in range(2):
            answer = PlainAnswer() if ready.template else AnswerFilter(names, after=after)
            finish = "stop"
            extra: dict[str, object] = {} if self.seed is None else {"seed": self.seed + attempt}
            if after and attempt:
                # A continuation that ended at once (closing the turn) is sampled again with
                # no line break allowed: it has to go on with the answer.
                extra["logit_bias"] = [[newline, False] for newline in NEWLINES]
            hold_from = max(1, (request.max_tokens or self.max_tokens) - SENTENCE_TAIL)
            made = 0
            called = False
            warmer = ChatRequest(
                messages=request.messages,
                temperature=temperature + attempt * RETRY_TEMPERATURE_STEP,
                max_tokens=request.max_tokens,
                stop=stop,  # the server ends the answer before another turn's label
                tools=request.tools,
                tool_choice=request.tool_choice,
            )
            if request.tools:
                # One call, then its result: a small model's next call is better made knowing
                # it (the server may still write one; the answer ends where it begins).
                extra["parallel_tool_calls"] = False
            async with aclosing(ready.client.chunks(warmer, extra)) as chunks:
                async for chunk in chunks:
                    if attempt == 0 and not cached and "prompt_progress" in chunk:
                        cached = self._cached_of(chunk)
                    piece, reason = _piece(chunk)
                    finish = reason or finish
                    fragments = _call_fragments(chunk)
                    if first := [f for f in fragments if f.get("index", 0) == 0]:
                        called = True
                        made += 1
                        self.generated += 1
                        # The server's tool call, passed on as it parsed it.
                        yield {"choices": [{"index": 0, "delta": {"tool_calls": first}}]}
                    if len(first) < len(fragments):
                        finish = "tool_calls"  # one call at a time: a second ends the answer
                        break
                    if not piece:
                        continue
                    made += 1
                    self.generated += 1
                    answer.hold_sentences = made >= hold_from
                    if text := answer.feed(piece):
                        yield _text_chunk(text)
                    if answer.stopped:
                        break  # closes the response: the server frees the slot
            produced += made
            if text := answer.finish(truncated=finish == "length"):
                yield _text_chunk(text)
            if has_words(answer.text) or called:
                break
            logger.info("The local model gave an empty answer (attempt %d)", attempt + 1)
        else:
            yield _text_chunk(fallback_line(sections, messages, after=after))
            finish = "stop"
        yield _last_chunk(finish, Usage(prompt.tokens, produced, cached))

    def _cached_of(self, chunk: Chunk) -> int:
        """The prompt tokens the server found in its cache, as a chunk's ``prompt_progress``
        says (the first chunks'); counted in :attr:`reused`."""
        progress = chunk.get("prompt_progress")
        if not isinstance(progress, dict):
            return 0
        found = progress.get("cache")
        found = found if isinstance(found, int) else 0
        self.reused += found
        return found


def _piece(chunk: Chunk) -> tuple[str, str | None]:
    """The text of a chunk of one answer, and its finish reason."""
    text, finish = "", None
    for choice in chunk.get("choices") or ():
        if isinstance(choice, dict):
            delta = choice.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("content"), str):
                text += delta["content"]
            if choice.get("finish_reason") is not None:
                finish = str(choice["finish_reason"])
    return text, finish


def _call_fragments(chunk: Chunk) -> list[dict[str, Any]]:
    """The tool-call fragments of a chunk: the server parsed them from the model's output
    through the chat template's format."""
    for choice in chunk.get("choices") or ():
        if isinstance(choice, dict) and isinstance(choice.get("delta"), dict):
            calls = choice["delta"].get("tool_calls")
            if isinstance(calls, list):
                return [call for call in calls if isinstance(call, dict)]
    return []


def _text_chunk(text: str) -> Chunk:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def _last_chunk(finish: str, usage: Usage) -> Chunk:
    return {
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_prompt_tokens},
        },
    }
