"""What ``/mcp`` shows an MCP client: the tools that ask personas, their results, and the
persona cards as resources (docs/mcp.md).

Two designs of tools, chosen by the number of personas a caller may call
(``PERSONA_AGENT_MCP_TOOLS``): a tool per persona (and per panel) named by its id, whose
description is its agent card, while there are few; one ``ask_persona`` tool, with the
persona as an argument, and ``list_personas`` to find one, past
``PERSONA_AGENT_MCP_PERSONA_TOOLS_MAX`` (measured in docs/mcp.md: a client sends every
tool's description to its model on each turn).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import mcp.types as types
from a2a.types.a2a_pb2 import AgentCard
from mcp.shared.exceptions import MCPError

__all__ = [
    "ASK_TOOL",
    "CARD_MIME",
    "CARD_TEMPLATE",
    "LIST_TOOL",
    "McpToolDesign",
    "ToolInputError",
    "ask_tools",
    "card_contents",
    "card_description",
    "card_page",
    "card_resource",
    "card_templates",
    "card_uri",
    "check_arguments",
    "listing",
    "page_offset",
    "persona_of_uri",
    "persona_tool",
    "persona_tool_schema",
    "tool_argument",
]

McpToolDesign = Literal["auto", "persona", "ask"]
"""``PERSONA_AGENT_MCP_TOOLS``: ``persona`` (a tool per persona), ``ask`` (one tool with
the persona as an argument), ``auto`` (``persona`` up to the setting's count, else ``ask``)."""

ASK_TOOL = "ask_persona"
LIST_TOOL = "list_personas"
CARD_MIME = "application/json"
CARD_TEMPLATE = "persona://{persona_id}/card"
_CARD_PREFIX = "persona://"
_CARD_SUFFIX = "/card"

MAX_DESCRIPTION = 1000
"""Characters of a persona tool's description at most (its card, summarized)."""

_MESSAGE = {"type": "string", "description": "What to say to the persona."}
_CONVERSATION = {
    "type": "string",
    "description": "Continue a conversation: the conversation_id an earlier answer returned "
    "(leave it out to start a new one).",
}


def persona_tool_schema() -> dict[str, Any]:
    """The input of a persona's own tool: a message, and a conversation to continue."""
    return {
        "type": "object",
        "properties": {"message": _MESSAGE, "conversation_id": _CONVERSATION},
        "required": ["message"],
        "additionalProperties": False,
    }


def _ask_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "persona": {
                "type": "string",
                "description": f"The persona's id (from {LIST_TOOL} or the persona:// resources).",
            },
            "message": _MESSAGE,
            "conversation_id": _CONVERSATION,
        },
        "required": ["persona", "message"],
        "additionalProperties": False,
    }


def _list_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "description": "Words to look for in a persona's id, name or description "
                "(leave it out to list them all).",
            }
        },
        "additionalProperties": False,
    }


_ANSWERS = types.ToolAnnotations(read_only_hint=False, open_world_hint=False)


def card_description(card: AgentCard) -> str:
    """A persona's card as a tool's description: who it is, then what it knows (its skills),
    at most :data:`MAX_DESCRIPTION` characters."""
    lines = [f"Ask {card.name}: {card.description}".strip()]
    skills = [skill for skill in card.skills if skill.description]
    if skills:
        lines.append("Skills:")
        lines.extend(f"- {skill.name}: {skill.description}" for skill in skills)
    lines.append("Answers as text; pass the returned conversation_id to continue the conversation.")
    text = "\n".join(lines)
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def persona_tool(persona_id: str, card: AgentCard) -> types.Tool:
    """A persona's own tool: named by its id (a slug, which no other tool name can be)."""
    return types.Tool(
        name=persona_id,
        title=card.name,
        description=card_description(card),
        input_schema=persona_tool_schema(),
        annotations=_ANSWERS,
    )


def ask_tools() -> list[types.Tool]:
    """The ``ask`` design: one tool to ask any persona, one to find them."""
    return [
        types.Tool(
            name=ASK_TOOL,
            title="Ask a persona",
            description="Ask one of this hub's personas (characters, experts, panels) and get "
            f"its answer. Find personas with {LIST_TOOL}; pass the returned conversation_id "
            "to continue a conversation.",
            input_schema=_ask_schema(),
            annotations=_ANSWERS,
        ),
        types.Tool(
            name=LIST_TOOL,
            title="List personas",
            description="The personas you may ask: each one's id, name and description.",
            input_schema=_list_schema(),
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
        ),
    ]


def card_uri(persona_id: str) -> str:
    return f"{_CARD_PREFIX}{persona_id}{_CARD_SUFFIX}"


def persona_of_uri(uri: str) -> str | None:
    """The persona id of a card's URI, ``None`` for any other URI."""
    if not (uri.startswith(_CARD_PREFIX) and uri.endswith(_CARD_SUFFIX)):
        return None
    persona_id = uri[len(_CARD_PREFIX) : -len(_CARD_SUFFIX)]
    return persona_id if persona_id and "/" not in persona_id else None


def card_resource(persona_id: str, card: AgentCard) -> types.Resource:
    return types.Resource(
        uri=card_uri(persona_id),
        name=persona_id,
        title=card.name,
        description=card.description,
        mime_type=CARD_MIME,
    )


def card_page(
    cards: Sequence[tuple[str, AgentCard]], offset: int, size: int
) -> types.ListResourcesResult:
    """A page of ``resources/list``: the cards from ``offset``, ``size`` at most."""
    resources = [
        card_resource(persona_id, card) for persona_id, card in cards[offset : offset + size]
    ]
    more = offset + size < len(cards)
    return types.ListResourcesResult(
        resources=resources, next_cursor=str(offset + size) if more else None
    )


def card_templates() -> types.ListResourceTemplatesResult:
    """``resources/templates/list``: a persona's card, by its id."""
    template = types.ResourceTemplate(
        uri_template=CARD_TEMPLATE,
        name="persona-card",
        title="A persona's agent card",
        description="The A2A agent card of a persona: who it is, its skills, its endpoints.",
        mime_type=CARD_MIME,
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


def card_contents(uri: str, card: dict[str, Any]) -> types.ReadResourceResult:
    """``resources/read`` of a card: the card as JSON."""
    text = json.dumps(card, ensure_ascii=False)
    contents = types.TextResourceContents(uri=uri, mime_type=CARD_MIME, text=text)
    return types.ReadResourceResult(contents=[contents])


def listing(entries: Sequence[tuple[str, AgentCard]], query: str) -> str:
    """``list_personas``' answer: a JSON list of id, name and description, filtered by the
    words of ``query`` (each must appear, case-insensitively)."""
    words = query.casefold().split()
    found = []
    for persona_id, card in entries:
        text = f"{persona_id} {card.name} {card.description}".casefold()
        if all(word in text for word in words):
            found.append({"id": persona_id, "name": card.name, "description": card.description})
    return json.dumps(found, ensure_ascii=False)


class ToolInputError(ValueError):
    """A tool call's arguments do not fit its input schema: told to the calling model as
    the tool's result (``isError``), which it can read and correct (SEP-1303, 2025-11-25),
    where a JSON-RPC error would reach its client alone."""


def check_arguments(arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    """Arguments the tool's schema does not name are refused (``additionalProperties:
    false``).

    Raises:
        ToolInputError: an argument the tool does not take, named with those it takes.
    """
    taken = schema.get("properties") or {}
    unknown = sorted(name for name in arguments if name not in taken)
    if unknown:
        names = ", ".join(f"'{name[:40]}'" for name in unknown[:5])
        raise ToolInputError(f"Unknown argument {names}: the tool takes {', '.join(taken)}")


def tool_argument(arguments: dict[str, Any], name: str, *, required: bool) -> str:
    """A tool call's text argument ``name`` (``""`` when left out and not ``required``).

    Raises:
        ToolInputError: it is not a string, or empty where required.
    """
    value = arguments.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ToolInputError(f"'{name}' must be a {'non-empty ' if required else ''}string")
    return value


def page_offset(params: types.PaginatedRequestParams | None) -> int:
    """Where a page of a list starts: its cursor (an offset), or 0.

    Raises:
        MCPError: the cursor is not one this server gave (Invalid params).
    """
    cursor = params.cursor if params is not None else None
    if not cursor:
        return 0
    if not cursor.isdigit():
        raise MCPError(types.INVALID_PARAMS, f"Unknown cursor '{cursor[:40]}'")
    return int(cursor)
