"""A tool as the model sees it (``server__tool``, OpenAI format), and a tool result as text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import mcp.types as types

__all__ = ["MAX_TOOL_NAME", "SEPARATOR", "ToolInfo", "render_result"]

SEPARATOR = "__"
"""Between the server name and the tool name: ``weather__forecast``."""
MAX_TOOL_NAME = 64
"""Longest function name OpenAI-compatible APIs accept."""


@dataclass(frozen=True)
class ToolInfo:
    """One tool of one server, as offered to the model."""

    name: str
    """Namespaced ``server__tool``: unique in the toolbox, a valid function name."""
    server: str
    description: str
    input_schema: dict[str, Any]
    tool: str = ""
    """The tool's own name on its server (``name`` is sanitized); empty: ``name``'s tail."""

    @property
    def remote_name(self) -> str:
        return self.tool or self.name.partition(SEPARATOR)[2]

    def openai_spec(self) -> dict[str, Any]:
        """The tool in the OpenAI ``tools`` format."""
        parameters = dict(self.input_schema)
        parameters.setdefault("type", "object")
        if parameters["type"] == "object":
            parameters.setdefault("properties", {})
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }


def render_result(result: types.CallToolResult) -> str:
    """A tool result as text for the model: text items joined by newlines, other
    items summarized, ``structuredContent`` as JSON when there is no text, and
    an ``"Error: "`` prefix when the tool reports an error."""
    parts: list[str] = []
    has_text = False
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
            has_text = True
        elif isinstance(block, types.ImageContent):
            parts.append(f"[image: {block.mime_type}]")
        elif isinstance(block, types.AudioContent):
            parts.append(f"[audio: {block.mime_type}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
        elif isinstance(block.resource, types.TextResourceContents):
            parts.append(block.resource.text)
            has_text = True
        else:
            mime = block.resource.mime_type or "application/octet-stream"
            parts.append(f"[resource: {block.resource.uri} ({mime})]")
    if not has_text and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if result.is_error:
        return f"Error: {text or 'the tool failed'}"
    return text
