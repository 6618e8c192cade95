"""What a persona tool call gives its MCP client: the answer so far as progress while the
persona answers, then the answer with the conversation to continue (:mod:`.mcp_server`).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.server.context import ServerRequestContext

from persona_agent.collab.local_calls import LocalEnd, LocalStart

__all__ = ["PROGRESS_TAIL", "SoFar", "answer_result", "report", "text_result", "wants_progress"]

PROGRESS_TAIL = 2000
"""Characters of the answer so far a progress notification carries at most (its end)."""


def wants_progress(ctx: ServerRequestContext[Any, Any]) -> bool:
    meta: Any = ctx.meta
    if not isinstance(meta, dict):
        return False
    return meta.get("progress_token", meta.get("progressToken")) is not None


class SoFar:
    """The answer as it streams: its pieces, its length and its end, kept as they come (a
    progress notification a piece must not copy the whole answer so far: a 1 MiB answer
    in 800 pieces was 400 MB of copies)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.length = 0
        self.tail = ""

    def add(self, text: str) -> None:
        self.pieces.append(text)
        self.length += len(text)
        self.tail = (self.tail + text[-PROGRESS_TAIL:])[-PROGRESS_TAIL:]


async def report(ctx: ServerRequestContext[Any, Any], answer: SoFar) -> None:
    """The answer so far (its end), and its length in characters as the progress."""
    shown = answer.tail if answer.length <= PROGRESS_TAIL else "…" + answer.tail
    await ctx.session.report_progress(float(answer.length), None, shown)


def text_result(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


def answer_result(
    persona_id: str, start: LocalStart | None, end: LocalEnd, text: str
) -> types.CallToolResult:
    """The persona's answer, with the conversation to continue (structured, in ``_meta``,
    and as a last line of text: a client that shows its model the text alone)."""
    conversation = start.context_id if start is not None else ""
    task_id = end.task_id or (start.task_id if start is not None else "")
    facts = {
        "persona": persona_id,
        "conversation_id": conversation,
        "task_id": task_id,
        "state": end.state,
    }
    content: list[types.ContentBlock] = [
        types.TextContent(type="text", text=text or f"({end.state}, no text)")
    ]
    if conversation:
        content.append(types.TextContent(type="text", text=f"conversation_id: {conversation}"))
    return types.CallToolResult(
        content=content,
        structured_content=facts,
        is_error=not end.ok,
        _meta={"conversationId": conversation, "taskId": task_id},
    )
