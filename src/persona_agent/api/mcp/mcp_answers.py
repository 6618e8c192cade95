"""What a persona tool call gives its MCP client: the answer so far as progress while the
persona answers, then the answer with the conversation to continue (:mod:`.mcp_server`).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.server.context import ServerRequestContext

from persona_agent.collab.local_calls import LocalEnd, LocalStart, LocalText

__all__ = ["PROGRESS_TAIL", "SoFar", "answer_result", "report", "text_result", "wants_progress"]

PROGRESS_TAIL = 2000
"""Characters of the answer so far a progress notification carries at most (its end)."""


def wants_progress(ctx: ServerRequestContext[Any, Any]) -> bool:
    meta: Any = ctx.meta
    if not isinstance(meta, dict):
        return False
    return meta.get("progress_token", meta.get("progressToken")) is not None


class SoFar:
    """The answer as it streams: its pieces, its length and the end of the artifact that
    grew last, kept as they come (a progress notification a piece must not copy the whole
    answer so far: a 1 MiB answer in 800 pieces was 400 MB of copies). A panel's answer
    has an artifact a member's turn (``panel``): its progress is the turn that grows,
    under the member's name, never the members' pieces run together."""

    def __init__(self, *, panel: bool = False) -> None:
        self.panel = panel
        self.pieces: list[str] = []
        self.length = 0
        self._names: dict[str, str] = {}
        self._tails: dict[str, tuple[int, str]] = {}
        self._last = ""

    def add(self, piece: LocalText) -> None:
        self.pieces.append(piece.text)
        self.length += len(piece.text)
        self._last = piece.artifact
        if piece.name:
            self._names.setdefault(piece.artifact, piece.name)
        length, tail = self._tails.get(piece.artifact, (0, ""))
        tail = (tail + piece.text[-PROGRESS_TAIL:])[-PROGRESS_TAIL:]
        self._tails[piece.artifact] = (length + len(piece.text), tail)

    def shown(self) -> str:
        """The end of the artifact that grew last (its last 2,000 characters), under its
        member's name for a panel."""
        length, tail = self._tails.get(self._last, (0, ""))
        text = tail if length <= PROGRESS_TAIL else "…" + tail
        if self.panel and self._last in self._names:
            return f"{self._names[self._last]}:\n{text}"
        return text


async def report(ctx: ServerRequestContext[Any, Any], answer: SoFar) -> None:
    """The answer so far (:meth:`SoFar.shown`), and its length in characters as the
    progress."""
    await ctx.session.report_progress(float(answer.length), None, answer.shown())


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
