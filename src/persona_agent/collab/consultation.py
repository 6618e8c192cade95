"""Personas consulting each other: a ``consult__{id}`` tool per persona a persona may ask.

A persona lists whom it may consult (``consult: [ids]``, or ``"*"``: every other persona).
The model sees one tool per such persona, named after it and described by its card; a
call asks the persona as a real A2A task of its own, in process
(:class:`~persona_agent.collab.local_calls.LocalCalls`), whose answer streams back as the
tool's progress. Consultations nest up to a depth (``PERSONA_AGENT_CONSULT_DEPTH``), and
never loop: a persona already asking down the chain cannot be consulted again.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from persona_agent.chat.tools import ToolProgress, ToolResult, ToolUpdate, Turn
from persona_agent.collab.local_calls import LocalCalls, LocalEnd, LocalStart, LocalText
from persona_agent.errors import ToolError
from persona_agent.personas.model import Persona

__all__ = ["CONSULT_PREFIX", "Consultations", "consult_tool_name", "consultable"]

logger = logging.getLogger(__name__)

CONSULT_PREFIX = "consult__"
MAX_NAME = 64
"""Longest tool name the OpenAI API accepts."""
MAX_EVERYONE = 32
"""Personas a ``consult: "*"`` offers at most (the first by id): each is a tool in every
request to the model."""
_CONTEXTS = uuid.UUID("0b8a4c6e-52f5-4d0c-9d4e-6a1f3e2b7c15")


def consult_tool_name(persona_id: str) -> str:
    """``consult__{id}``; a long id is cut and given a hash, to fit the 64 characters."""
    name = CONSULT_PREFIX + persona_id
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(persona_id.encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def consultable(
    persona: Persona,
    lookup: Callable[[str], Persona | None],
    personas: Callable[[], list[Persona]],
) -> list[Persona]:
    """The personas ``persona`` may consult now: those it names that are served (never
    itself), or for ``"*"`` the first :data:`MAX_EVERYONE` others by id."""
    if not persona.consult:
        return []
    if persona.consult == "*":
        return [p for p in personas() if p.id != persona.id][:MAX_EVERYONE]
    found = (lookup(i) for i in persona.consult if i != persona.id)
    return [target for target in found if target is not None]


class Consultations:
    """The ``consult__*`` tools, as a :class:`~persona_agent.chat.tools.ToolSource`.

    ``lookup(id)`` gives a served persona, ``personas()`` all of them (the registry's).
    A consultation is made for the asking task's caller: a caller who could not call the
    persona consulted directly (its key names other personas, or the persona needs an
    authenticated caller) is refused it too, by the personas' request handler that every
    call passes (a ``rejected`` end, a tool error here).
    """

    def __init__(
        self,
        calls: LocalCalls,
        lookup: Callable[[str], Persona | None],
        personas: Callable[[], list[Persona]],
        *,
        max_depth: int = 2,
    ) -> None:
        self.calls = calls
        self.lookup = lookup
        self.personas = personas
        self.max_depth = max_depth

    def specs(self, persona: Persona) -> list[dict[str, Any]]:
        if self.max_depth == 0:
            return []
        return [_spec(target) for target in consultable(persona, self.lookup, self.personas)]

    def owns(self, name: str) -> bool:
        return name.startswith(CONSULT_PREFIX)

    async def call(
        self, persona: Persona, name: str, arguments: dict[str, Any], turn: Turn
    ) -> AsyncGenerator[ToolUpdate, None]:
        target = self._target(persona, name)
        question = arguments.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ToolError(f"{name} needs a 'question': the text to ask {target.name}")
        chain = turn.chain or (persona.id,)
        if target.id in chain:
            path = " → ".join([*chain, target.id])
            raise ToolError(f"Consulting {target.id} would go round in a loop ({path})")
        if len(chain) > self.max_depth:
            raise ToolError(
                f"Consultations may go {self.max_depth} deep "
                f"({' → '.join(chain)}): answer without consulting {target.id}"
            )
        spent = turn.budget.model_call_refusal() if turn.budget is not None else None
        if spent is not None:  # the persona consulted could not say a word
            raise ToolError(f"{spent}: answer without consulting {target.id}")
        # One conversation per (asking conversation, persona asked): a persona consulted
        # twice in a conversation remembers the first question.
        context_id = str(uuid.uuid5(_CONTEXTS, f"{persona.id}/{turn.conversation}/{target.id}"))
        about: dict[str, Any] = {"persona": target.id, "contextId": context_id}
        answer: list[str] = []
        stream = self.calls.stream(
            target.id,
            question,
            origin=turn.origin,
            chain=chain,
            context_id=context_id,
            reference_task_ids=(turn.task_id,) if turn.task_id else (),
        )
        async with aclosing(stream):
            async for event in stream:
                if isinstance(event, LocalStart):
                    about["taskId"] = event.task_id
                elif isinstance(event, LocalText):
                    answer.append(event.text)
                    yield ToolProgress(event.text, about)
                elif isinstance(event, LocalEnd):
                    if event.state == "rejected" and not event.task_id:  # never asked
                        raise ToolError(f"The caller may not consult {target.id}: {event.text}")
                    if not event.ok:
                        why = event.text or "no reason given"
                        raise ToolError(f"{target.name} could not answer ({event.state}): {why}")
                    yield ToolResult(event.text or "".join(answer), data=about)
                    return
        raise ToolError(f"{target.name} did not answer")

    def _target(self, persona: Persona, name: str) -> Persona:
        for target in consultable(persona, self.lookup, self.personas):
            if consult_tool_name(target.id) == name:
                return target
        wanted = name.removeprefix(CONSULT_PREFIX)
        if self.lookup(wanted) is None:
            raise ToolError(f"No persona '{wanted}' to consult")
        raise ToolError(f"{persona.id} may not consult '{wanted}'")


def _spec(target: Persona) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": consult_tool_name(target.id),
            "description": f"Ask {target.name} ({target.description})"[:1024],
            "parameters": {
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "description": f"What to ask {target.name}, as a complete question",
                    }
                },
                "required": ["question"],
            },
        },
    }
