"""The tools a model may call, from every source the hub has: MCP servers, the hub's other
personas (consultation), agents outside the hub. The engine sees one :class:`ToolSource`.

A call streams: a source may report progress (a consulted persona's answer as it grows)
before its :class:`ToolResult`. A :class:`Turn` tells a source who asks and where, so
that a call made for a caller runs as that caller (the engine does not look inside it).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from persona_agent.chat.budget import CallBudget
from persona_agent.chat.supplied import SuppliedTurn
from persona_agent.errors import ToolError
from persona_agent.knowledge.turn import AttachedFile
from persona_agent.media.images import ImageInput
from persona_agent.personas.model import Persona
from persona_agent.personas.user_identity import UserPersona

__all__ = [
    "MCPTools",
    "ToolProgress",
    "ToolQuestion",
    "ToolResult",
    "ToolSource",
    "ToolSources",
    "ToolUpdate",
    "Toolbox",
    "Turn",
]


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """Part of what a running tool has to say (relayed to the client, not to the model)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    """Where the progress comes from (e.g. the consulted task's id), for the client."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What the model reads back; an error too (``is_error``), so the model can go on."""

    text: str
    is_error: bool = False
    data: dict[str, Any] = field(default_factory=dict)
    """Facts about the call for the client (e.g. the consulted task's id)."""


@dataclass(frozen=True, slots=True)
class ToolQuestion:
    """The tool cannot go on without the user (an outside agent's ``input-required``): the
    turn ends asking ``text`` (the A2A task waits in ``input-required``), and the user's
    answer, the next message of the same task, is given to the same tool, as the argument
    ``answer_argument``, before the model goes on."""

    text: str
    answer_argument: str = "message"
    data: dict[str, Any] = field(default_factory=dict)


ToolUpdate = ToolProgress | ToolResult | ToolQuestion


@dataclass(frozen=True, slots=True)
class Turn:
    """The turn a tool is called in: the persona answering, its conversation, and what the
    protocol layer passes through (``origin``: the A2A call context the turn runs under;
    ``task_id``: the A2A task answering; ``chain``: the personas that consulted each other
    down to this one, outermost first; ``budget``: the request's calls, which this turn's
    model and tool calls count against, see :mod:`persona_agent.chat.budget`; ``whole``:
    nobody watches the answer grow, a blocking send, so it may come in one piece)."""

    persona_id: str
    conversation: str
    task_id: str = ""
    context_id: str = ""
    chain: tuple[str, ...] = ()
    origin: Any = None
    budget: CallBudget | None = None
    whole: bool = False
    owner: str = ""
    """The identified caller the conversation belongs to (empty: anonymous), whose
    memory with the persona the turn reads and adds to."""
    new_context: bool = False
    """The conversation was begun by this message (its context id minted for it by the
    protocol layer): nothing is stored under it, so its history and user persona are not
    read."""
    files: tuple[AttachedFile, ...] = ()
    """Documents sent with the message (A2A file parts) that were cut to fit the turn:
    kept as the conversation's knowledge, where the rest is looked up."""
    documents: tuple[dict[str, Any], ...] = ()
    """The message's documents, as the stored user message's ``files`` entries (name,
    mediaType, bytes, tokens, shownTokens); their text is in the message's text already."""
    question: str = ""
    """The user's own words when the message brings documents (its text and data parts):
    what memory and the documents are searched with, rather than the documents' text."""
    mode: Literal["message", "regenerate", "continue"] = "message"
    """Answer the message; or answer the last user message again, or continue the last
    answer, the message ignored (:mod:`persona_agent.chat.turn_modes`)."""
    greeting: int | None = None
    """A new conversation opens with this greeting (0: the first message, k: the k-th
    alternate greeting), the others kept as its alternatives."""
    user: UserPersona | None = None
    """Who the user says they are with this message (the A2A user extension): the
    conversation's user persona from now on; ``None``: as the conversation, the caller's
    saved one or the default say (:class:`~persona_agent.chat.user_source.UserSource`)."""
    images: tuple[ImageInput, ...] = ()
    """The message's images, prepared (:mod:`persona_agent.media`): stored with the
    conversation and shown to a model that sees."""
    supplied: SuppliedTurn | None = None
    """The conversation as the caller sends it, with its instructions, tools and sampling
    (a stateless door: :mod:`persona_agent.chat.supplied`); ``None``: the stored one."""


class ToolSource(Protocol):
    """One kind of tools. Names are namespaced (``server__tool``, ``consult__id``,
    ``agent__name``) so that sources never share one."""

    def specs(self, persona: Persona) -> list[dict[str, Any]]:
        """The tools ``persona`` may call, in the OpenAI ``tools`` format."""
        ...

    def owns(self, name: str) -> bool:
        """Whether a tool called ``name`` would be one of this source's."""
        ...

    def call(
        self, persona: Persona, name: str, arguments: dict[str, Any], turn: Turn
    ) -> AsyncGenerator[ToolUpdate, None]:
        """Run the tool: any :class:`ToolProgress`, then one :class:`ToolResult` (or a
        :class:`ToolQuestion` for the user).

        Raises:
            ToolError: the tool is unknown, not allowed or failed (a message for the model).
            asyncio.CancelledError: the turn was cancelled; the call is abandoned, and
                whatever it started elsewhere is stopped.
        """
        ...


class Toolbox(Protocol):
    """What the engine needs of the MCP toolbox
    (:class:`~persona_agent.tools.toolbox.MCPToolbox`)."""

    def tool_specs(self, allow: list[str] | None) -> list[dict[str, Any]]: ...

    async def call(
        self, name: str, arguments: dict[str, Any], *, allow: list[str] | None
    ) -> str: ...


class MCPTools:
    """The MCP servers' tools as a source: a persona's ``tools.allow`` applies."""

    def __init__(self, toolbox: Toolbox) -> None:
        self.toolbox = toolbox

    def specs(self, persona: Persona) -> list[dict[str, Any]]:
        return self.toolbox.tool_specs(persona.tools.allow)

    def owns(self, name: str) -> bool:
        return True  # the last source asked: an unknown name is the toolbox's to refuse

    async def call(
        self, persona: Persona, name: str, arguments: dict[str, Any], turn: Turn
    ) -> AsyncGenerator[ToolUpdate, None]:
        yield ToolResult(await self.toolbox.call(name, arguments, allow=persona.tools.allow))


class ToolSources:
    """Several sources as one: the specs of all, each call routed to its source by name."""

    def __init__(self, sources: Sequence[ToolSource]) -> None:
        self.sources = list(sources)

    def specs(self, persona: Persona) -> list[dict[str, Any]]:
        return [spec for source in self.sources for spec in source.specs(persona)]

    def owns(self, name: str) -> bool:
        return any(source.owns(name) for source in self.sources)

    def call(
        self, persona: Persona, name: str, arguments: dict[str, Any], turn: Turn
    ) -> AsyncGenerator[ToolUpdate, None]:
        for source in self.sources:
            if source.owns(name):
                return source.call(persona, name, arguments, turn)
        raise ToolError(f"Unknown tool '{name}'")
