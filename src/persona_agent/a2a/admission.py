"""Whether an A2A call may be served: who calls, whether they may, and within which limits.

The A2A router asks it before a call reaches the SDK: :meth:`Admission.admit` finds the
caller (an API key's or a token's principal, else the client's address) and checks its
access and request rates; :meth:`Admission.counted` holds a stream's place among the
caller's open streams while it is served and refuses a task over the running ones. A
refusal is counted (``/metrics``), written to the audit log, and answered in the shape of
the call's binding.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from a2a.auth.user import UnauthenticatedUser
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import StarletteUser
from starlette.authentication import AuthCredentials
from starlette.responses import Response
from starlette.types import Scope

from persona_agent.a2a.calls import call_kind, http_error
from persona_agent.a2a.context_keys import CALLER_KEY, PRINCIPAL_STATE_KEY, REQUEST_ID_KEY
from persona_agent.a2a.services import HubServices
from persona_agent.personas.model import Persona
from persona_agent.security.authorization import Action
from persona_agent.security.principal import AuthError, Principal
from persona_agent.security.quotas import RateLimited

__all__ = ["Admission", "Refusal", "admitted_context"]


class Admission:
    """The A2A side's gate, on the hub's authenticator, quotas, metrics and audit log."""

    def __init__(self, services: HubServices) -> None:
        self._auth = services.auth
        self._quotas = services.quotas
        self._metrics = services.metrics
        self._audit = services.audit

    async def admit(
        self, persona: Persona | None, rest: str, scope: Scope, inner: dict[str, Any]
    ) -> Response | None:
        """Who calls (into ``inner``), and whether it may: a refusal in the shape of the
        call's binding (``rest``: the path below the persona), or ``None``. See
        :meth:`check`."""
        refusal = await self.check(persona, scope["headers"], scope.get("client"), inner)
        return None if refusal is None else refusal.response(rest)

    async def check(
        self,
        persona: Persona | None,
        headers: list[tuple[bytes, bytes]],
        client: tuple[str, int] | None,
        inner: dict[str, Any],
    ) -> Refusal | None:
        """Who calls (into ``inner``: the caller, and the principal as ``user``), and
        whether it may: a :class:`Refusal`, or ``None``. Every door that calls a persona
        for a caller over the network asks it (the A2A router, the gRPC server with its
        metadata as ``headers``, ``/mcp``).

        The decision is :class:`~persona_agent.security.authorization.Authorization`'s. The
        directory (``persona`` None) is admitted as a persona without ``access:`` or
        ``limits:`` of its own: under the hub's default access and limits; any principal
        with the A2A scope may use it, whichever personas its key names.
        """
        inner[CALLER_KEY] = f"ip:{client[0]}" if client else "ip:unknown"
        persona_id = persona.id if persona is not None else ""
        if self._auth is not None:
            auth = self._auth
            if persona is None:  # the directory: not one of the personas a key may name
                action, access = Action.DIRECTORY, None
            else:
                action, access = Action.CALL, persona.access
            try:
                principal = await auth.principal(headers)
                auth.authorization.check(principal, action, persona_id, access=access)
            except AuthError as error:
                self._record("auth.refused", persona_id, inner, str(error.status), error.message)
                self._refusal(persona_id, "unauthenticated" if error.status == 401 else "forbidden")
                return self._refused(error)
            if principal is not None:  # the SDK's context builder reads the Starlette user
                inner["user"] = principal
                inner["auth"] = AuthCredentials(sorted(principal.scopes))
                inner[CALLER_KEY] = principal.name
        caller = inner[CALLER_KEY]
        try:
            self._quotas.check_rate(caller, self._quotas.limits.requests_per_minute)
            if persona is not None:
                persona_rate = persona.limits.requests_per_minute or 0
                self._quotas.check_rate(caller, persona_rate, scope=persona_id)
        except RateLimited as error:
            return self._rate_refusal(persona_id, inner, error)
        return None

    @asynccontextmanager
    async def counted(
        self, persona: Persona | None, rest: str, method: Any, inner: dict[str, Any]
    ) -> AsyncIterator[Response | None]:
        """:meth:`held` for a call by its path below the persona (``rest``) and its
        JSON-RPC ``method``; a refusal in the shape of the call's binding."""
        async with self.held(persona, call_kind(rest, method), inner) as refusal:
            yield None if refusal is None else refusal.response(rest)

    @asynccontextmanager
    async def held(
        self, persona: Persona | None, kind: str | None, inner: dict[str, Any]
    ) -> AsyncIterator[Refusal | None]:
        """Hold a stream's place in the caller's open streams while it is served; refuse a
        send or stream over the caller's (or the persona's) running tasks. ``kind``:
        ``send``, ``stream``, ``subscribe`` (:func:`~.calls.call_kind`), or None."""
        if kind is None or CALLER_KEY not in inner:
            yield None
            return
        # The directory's answers are no tasks: only its streams count.
        if kind in ("send", "stream") and persona is not None:
            refusal = self.may_start(persona, inner)
            if refusal is not None:
                yield refusal
                return
        if kind not in ("stream", "subscribe"):
            yield None
            return
        persona_id = persona.id if persona is not None else ""
        try:
            with self._quotas.stream(inner[CALLER_KEY]):
                yield None
        except RateLimited as error:
            yield self._rate_refusal(persona_id, inner, error)

    def may_start(self, persona: Persona, inner: dict[str, Any]) -> Refusal | None:
        """Whether the caller admitted into ``inner`` (:meth:`check`) may start a task of
        ``persona`` now (its running tasks, the persona's): a :class:`Refusal`, or ``None``.
        ``/mcp`` asks it for a tool call, :meth:`held` for a send or a stream."""
        try:
            self._quotas.check_start(
                inner[CALLER_KEY], persona.id, persona.limits.running_tasks or 0
            )
        except RateLimited as error:
            return self._rate_refusal(persona.id, inner, error)
        return None

    def _rate_refusal(self, persona_id: str, inner: dict[str, Any], error: RateLimited) -> Refusal:
        """429, counted and audited."""
        self._record("rate.refused", persona_id, inner, "429", error.message)
        self._refusal(persona_id, "rate_limited")
        return _rate_limited(error)

    def _refusal(self, persona_id: str, reason: str) -> None:
        self._metrics.refusals.labels(persona_id, reason).inc()

    def _record(
        self, action: str, persona_id: str, inner: dict[str, Any], outcome: str, reason: str
    ) -> None:
        user = inner.get("user")
        self._audit.record(
            action,
            principal=user.name if isinstance(user, Principal) else None,
            persona=persona_id,
            outcome=outcome,
            request_id=inner.get(REQUEST_ID_KEY),
            reason=reason,
        )

    def _refused(self, error: AuthError) -> Refusal:
        """401 (with ``WWW-Authenticate``) or 403."""
        assert self._auth is not None
        if error.status == 401:
            headers = {"WWW-Authenticate": self._auth.challenge(error)}
            return Refusal(401, "UNAUTHENTICATED", error.message, headers)
        return Refusal(error.status, "PERMISSION_DENIED", error.message, {})


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call refused before it reaches the SDK: its HTTP status (401, 403, 429), the
    status name (``UNAUTHENTICATED``, ``PERMISSION_DENIED``, ``RESOURCE_EXHAUSTED``, also
    the gRPC status code's), the message and the headers to answer with."""

    status: int
    name: str
    message: str
    headers: dict[str, str]
    extra: dict[str, Any] = field(default_factory=dict)

    def response(self, rest: str) -> Response:
        """The refusal in the shape of the HTTP binding of ``rest`` (see :func:`.http_error`)."""
        return http_error(rest, self.status, self.name, self.message, self.headers, self.extra)


def _rate_limited(error: RateLimited) -> Refusal:
    """429 with ``Retry-After``."""
    headers = {"Retry-After": str(error.retry_after)}
    extra = {"retryAfter": error.retry_after}
    return Refusal(429, "RESOURCE_EXHAUSTED", error.message, headers, extra)


def admitted_context(inner: dict[str, Any]) -> ServerCallContext:
    """The A2A call context of a caller :meth:`Admission.check` admitted into ``inner``, for
    a door inside the hub that starts its task (:class:`~persona_agent.collab.local_calls.
    LocalCalls`): the caller owns the task and counts it, and its principal is the one the
    forwarding handler authorizes, for the task and every call the task makes (its
    consultations, a panel's members)."""
    user = inner.get("user")
    state: dict[str, Any] = {
        CALLER_KEY: inner[CALLER_KEY],
        REQUEST_ID_KEY: inner.get(REQUEST_ID_KEY),
    }
    if isinstance(user, Principal):
        state[PRINCIPAL_STATE_KEY] = user
        return ServerCallContext(user=StarletteUser(user), state=state)
    return ServerCallContext(user=UnauthenticatedUser(), state=state)
