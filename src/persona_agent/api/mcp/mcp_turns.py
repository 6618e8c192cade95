"""A persona tool call as a turn of the persona: admitted as an A2A call is, run as an A2A
task through the hub's forwarding handler, its answer so far reported, and canceled with
the client's cancel.

The turn is made through :class:`~persona_agent.collab.local_calls.LocalCalls` for the
caller the request's credentials name: the same admission (authentication, authorization,
rates, running tasks: :class:`~persona_agent.a2a.admission.Admission`), the same owner
and the same audit log as an A2A call. While the persona answers, a client that gave a
progress token hears the answer so far (:mod:`.mcp_answers`).
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import mcp.types as types
from a2a.auth.user import UnauthenticatedUser
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import StarletteUser
from a2a.utils.errors import A2AError
from mcp.server.context import ServerRequestContext
from starlette.types import Scope

from persona_agent.a2a.admission import Admission
from persona_agent.a2a.context_keys import CALLER_KEY, PRINCIPAL_STATE_KEY, REQUEST_ID_KEY
from persona_agent.a2a.registry import A2ARegistry
from persona_agent.api.mcp.mcp_answers import (
    SoFar,
    answer_result,
    report,
    text_result,
    wants_progress,
)
from persona_agent.api.mcp.mcp_stateless import CallsInFlight, cancel_key
from persona_agent.collab.local_calls import LocalCalls, LocalEnd, LocalStart, LocalText
from persona_agent.personas.model import Persona
from persona_agent.security.principal import Principal

__all__ = ["MCP_BINDING", "ToolTurns"]

MCP_BINDING = "mcp"
"""A tool call's binding label in the request metrics (``persona_agent_a2a_requests_total``)."""


class ToolTurns:
    """Persona tool calls, each a turn through the admission and the forwarding handler of
    ``registry``; ``in_flight``: the calls running here that a cancel may name."""

    def __init__(self, registry: A2ARegistry, in_flight: CallsInFlight) -> None:
        self._calls = LocalCalls(registry.local_handler)
        self._admission = Admission(registry.services)
        self._in_flight = in_flight

    async def ask(
        self,
        ctx: ServerRequestContext[Any, Any],
        scope: Scope,
        persona: Persona,
        message: str,
        conversation: str,
    ) -> types.CallToolResult:
        """Ask ``persona`` for the caller of ``ctx`` (``scope``: its HTTP request, or the stdio
        caller's), through the admission and the forwarding handler."""
        inner: dict[str, Any] = {REQUEST_ID_KEY: f"mcp-{ctx.request_id}"}
        refused = await self._admission.check(persona, scope["headers"], scope.get("client"), inner)
        if refused is None:
            refused = self._admission.may_start(persona, inner)
        if refused is not None:
            return text_result(refused.message, error=True)
        origin = _call_context(inner)
        progress = wants_progress(ctx)
        answer = SoFar(panel=persona.panel is not None)
        start: LocalStart | None = None
        end = LocalEnd("", "failed", "The persona did not answer")
        events = self._calls.stream(
            persona.id,
            message,
            origin=origin,
            context_id=conversation,
            whole=not progress,
            binding=MCP_BINDING,
        )

        async def consume() -> None:
            nonlocal start, end
            async with aclosing(events) as stream:
                async for event in stream:
                    if isinstance(event, LocalStart):
                        start = event
                    elif isinstance(event, LocalText):
                        answer.add(event)
                        if progress:
                            await report(ctx, answer)
                    else:
                        end = event

        try:
            if not await self._in_flight.run(consume(), cancel_key(ctx.request, ctx.request_id)):
                task_id = start.task_id if start is not None else ""
                end = LocalEnd(task_id, "canceled", "The client canceled the call")
        except A2AError as error:
            return text_result(f"{persona.id}: {error.message}", error=True)
        # The final message is the answer as every door gives it (a panel's: each
        # member's turn under its name); the pieces, when it has no text.
        text = end.text or "".join(answer.pieces)
        return answer_result(persona.id, start, end, text)


def _call_context(inner: dict[str, Any]) -> ServerCallContext:
    """The A2A call context of the admitted caller: it owns the task, its principal is the
    one the forwarding handler authorizes."""
    user = inner.get("user")
    state: dict[str, Any] = {CALLER_KEY: inner[CALLER_KEY], REQUEST_ID_KEY: inner[REQUEST_ID_KEY]}
    if isinstance(user, Principal):
        state[PRINCIPAL_STATE_KEY] = user
        return ServerCallContext(user=StarletteUser(user), state=state)
    return ServerCallContext(user=UnauthenticatedUser(), state=state)
