"""An OpenAI chat-completions stream's chunks, as the server's JSON has them, read into what
the hub's stream ends with: the text of each chunk, the tool calls reassembled from their
fragments, the usage, the finish reason. Types checked field by field: a field of the
wrong type counts as absent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from persona_agent.errors import LLMError
from persona_agent.llm.base import StreamEnd, ToolCall, Usage

__all__ = ["Chunk", "PartialCall", "absorb", "stream_end", "usage_of"]

Chunk = dict[str, Any]
"""One chunk of the stream, as the server's JSON has it."""


@dataclass
class PartialCall:
    """A tool call being reassembled from its streamed fragments."""

    id: str = ""
    name: str = ""
    arguments: str = ""


def stream_end(finish: str | None, calls: dict[int, PartialCall], usage: Usage) -> StreamEnd:
    """The stream's end: its tool calls, usage and finish reason.

    Raises:
        LLMError: the stream ended without a finish reason (broken off).
    """
    if finish is None:
        raise LLMError("The language model stream broke off before the answer was complete")
    tool_calls = [
        ToolCall(id=call.id or f"call_{index}", name=call.name, arguments=call.arguments)
        for index, call in sorted(calls.items())
    ]
    return StreamEnd(tool_calls=tool_calls, usage=usage, finish_reason=finish)


def usage_of(chunk: Chunk) -> Usage | None:
    """The usage a chunk reports (the last one, with ``include_usage``), if any."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details")
    details = details if isinstance(details, dict) else {}
    return Usage(
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
        _count(details.get("cached_tokens")),
        _count(details.get("image_tokens")),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def absorb(chunk: Chunk, calls: dict[int, PartialCall]) -> tuple[str, str | None]:
    """The text of a chunk's first choice, its tool-call fragments added to ``calls``,
    and its finish reason (a field of the wrong type counts as absent)."""
    text, finish = "", None
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict) or choice.get("index"):
            continue  # only one choice is ever asked for
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str):
                text += content
            for part in delta.get("tool_calls") or ():
                if isinstance(part, dict):
                    _add_fragment(calls, part)
        reason = choice.get("finish_reason")
        if reason is not None:
            finish = str(reason)
    return text, finish


def _add_fragment(calls: dict[int, PartialCall], part: dict[str, Any]) -> None:
    """One streamed fragment of a tool call: its id and name (some servers repeat them in
    every fragment: kept once), a piece of its arguments."""
    index = part.get("index")
    call = calls.setdefault(index if isinstance(index, int) else 0, PartialCall())
    call.id = call.id or _text(part.get("id"))
    function = part.get("function")
    if isinstance(function, dict):
        call.name = call.name or _text(function.get("name"))
        call.arguments += _text(function.get("arguments"))


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
