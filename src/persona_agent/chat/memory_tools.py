"""The memory tools, as a :class:`~persona_agent.chat.tools.ToolSource`: ``remember`` (keep
a fact about the caller), ``recall`` (search the caller's memory), ``forget`` (delete what
the caller's memory holds about something), as Letta's agents edit their own memory.

Each call works on the turn's persona and caller only (:meth:`SharedMemory.scope`, from
the :class:`~persona_agent.chat.tools.Turn`, never from the model's arguments): no
argument can name another caller. Offered when the hub's memory is on and the persona's
``memory.enabled`` and ``memory.tools`` are true (docs/memory.md).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from persona_agent.chat.tools import ToolResult, ToolUpdate, Turn
from persona_agent.errors import ToolError
from persona_agent.personas.model import Persona

if TYPE_CHECKING:  # the memory's modules load numpy: imported only with memory on
    from persona_agent.memory.shared import Found, SharedMemory

__all__ = ["MEMORY_DATA_KEY", "MEMORY_TOOLS", "MemoryTools"]

MEMORY_TOOLS = ("remember", "recall", "forget")
"""The tools' names: no ``__`` in them, so no other source's name (``server__tool``,
``consult__id``, ``agent__name``) is one of them."""
MEMORY_DATA_KEY = "memory"
"""The key of a memory tool's result data that says what changed (``kept``: facts,
``forgotten``: texts), gathered into the answer's memory-v1 part."""
RECALL_ITEMS = 8
"""Items the ``recall`` tool gives back at most."""
SEARCH_TOKENS = 1000
"""Tokens of remembered text the ``recall`` tool gives back at most."""


class MemoryTools:
    """``remember``, ``recall`` and ``forget`` on :class:`SharedMemory`."""

    def __init__(self, memory: SharedMemory) -> None:
        self.memory = memory

    def specs(self, persona: Persona) -> list[dict[str, Any]]:
        if not (persona.memory.enabled and persona.memory.tools):
            return []
        return list(_SPECS)

    def owns(self, name: str) -> bool:
        return name in MEMORY_TOOLS

    async def call(
        self, persona: Persona, name: str, arguments: dict[str, Any], turn: Turn
    ) -> AsyncGenerator[ToolUpdate, None]:
        scope = self.memory.scope(persona, turn.owner, turn.conversation)
        if scope is None or not persona.memory.tools:
            raise ToolError(f"{persona.id} has no memory tools")
        metrics = self.memory.metrics.memory_tool_calls
        try:
            if name == "remember":
                fact = _text(arguments, "fact", "the fact about the user to keep")
                kept = await self.memory.remember(scope, fact)
                result = ToolResult(f"Remembered: {kept}", data={MEMORY_DATA_KEY: {"kept": [kept]}})
            elif name == "recall":
                query = _text(arguments, "query", "what to look for")
                found = await self.memory.search(
                    scope, query, token_budget=SEARCH_TOKENS, max_items=RECALL_ITEMS
                )
                result = ToolResult(_listed(found) or "Nothing remembered matches.")
            else:
                about = arguments.get("about", "")
                ids = arguments.get("ids", [])
                if not isinstance(about, str) or not isinstance(ids, list):
                    raise ToolError("forget takes 'about' (text) and 'ids' (a list of ids)")
                gone = await self.memory.forget(scope, about, [str(i) for i in ids])
                result = ToolResult(
                    f"Forgot {len(gone)}:\n{_listed(gone)}" if gone else "Nothing matched.",
                    data={MEMORY_DATA_KEY: {"forgotten": [item.text for item in gone]}},
                )
        except ToolError:
            metrics.labels(persona.id, name, "error").inc()
            raise
        except Exception as error:
            metrics.labels(persona.id, name, "error").inc()
            raise ToolError(f"memory is not available now ({type(error).__name__})") from error
        metrics.labels(persona.id, name, "ok").inc()
        yield result


def _text(arguments: dict[str, Any], name: str, about: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"'{name}' is required: {about}")
    return value


def _listed(found: list[Found]) -> str:
    return "\n".join(f"[{item.id}] {item.marked}" for item in found)


_SPECS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": "remember",
            "description": (
                "Keep a fact about the user you are talking to, for later conversations "
                "with them (a preference, a name, a plan). Only this user's memory is kept."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "fact": {"type": "string", "description": "The fact, as one sentence"}
                },
                "required": ["fact"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "recall",
            "description": (
                "Search what you remember of the user you are talking to (what they said, "
                "what you answered, facts you kept); each item comes with its [id]."
            ),
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to look for"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "forget",
            "description": (
                "Forget what you remember of the user you are talking to: the items whose "
                "[id] recall gave, or every item holding all the words of 'about'."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "about": {"type": "string", "description": "Words every item to forget holds"},
                    "ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Ids of items to forget, as recall gave them",
                    },
                },
            },
        },
    },
)
