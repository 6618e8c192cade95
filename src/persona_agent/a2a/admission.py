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
from typing import Any

from starlette.authentication import AuthCredentials
from starlette.responses import Response
from starlette.types import Scope

from persona_agent.a2a.calls import call_kind, http_error
from persona_agent.a2a.context_keys import CALLER_KEY, REQUEST_ID_KEY
from persona_agent.a2a.services import HubServices
from persona_agent.personas.model import Persona
from persona_agent.security.authorization import Action
from persona_agent.security.principal import AuthError, Principal
from persona_agent.security.quotas import RateLimited

__all__ = ["Admission"]


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
        """Who calls (into ``inner``), and whether it may: a refusal in the binding's shape
        (``rest``: the path below the persona), or ``None``. See :meth:`refusal`."""
        refused = await self.refusal(persona, scope, inner)
        if isinstance(refused, AuthError):
            return self._refused(rest, refused)
        if isinstance(refused, RateLimited):
            return _rate_limited(rest, refused)
        return None

    async def refusal(
        self, persona: Persona | None, scope: Scope, inner: dict[str, Any]
    ) -> AuthError | RateLimited | None:
        """Who calls (into ``inner``: ``user``, ``auth`` and the caller's name), and whether
        it may: the refusal (counted and audited), or ``None``. Every door that calls a
        persona for a caller over the network asks this (A2A's router, ``/mcp``).

        The decision is :class:`~persona_agent.security.authorization.Authorization`'s. The
        directory (``persona`` None) is admitted as a persona without ``access:`` or
        ``limits:`` of its own: under the hub's default access and limits; any principal
        with the A2A scope may use it, whichever personas its key names.
        """
        client = scope.get("client")
        inner[CALLER_KEY] = f"ip:{client[0]}" if client else "ip:unknown"
        persona_id = persona.id if persona is not None else ""
        if self._auth is not None:
            auth = self._auth
            if persona is None:  # the directory: not one of the personas a key may name
                action, access = Action.DIRECTORY, None
            else:
                action, access = Action.CALL, persona.access
            try:
                principal = await auth.principal(scope["headers"])
                auth.authorization.check(principal, action, persona_id, access=access)
            except AuthError as error:
                self._record("auth.refused", persona_id, inner, str(error.status), error.message)
                self._refusal(persona_id, "unauthenticated" if error.status == 401 else "forbidden")
                return error
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
            self._record("rate.refused", persona_id, inner, "429", error.message)
            self._refusal(persona_id, "rate_limited")
            return error
        return None

    def start_refusal(self, persona: Persona, inner: dict[str, Any]) -> RateLimited | None:
        """Whether the caller admitted into ``inner`` may start a task of ``persona`` now
        (its running tasks, the persona's): the refusal (counted and audited), or ``None``."""
        try:
            self._quotas.check_start(
                inner[CALLER_KEY], persona.id, persona.limits.running_tasks or 0
            )
        except RateLimited as error:
            self._record("rate.refused", persona.id, inner, "429", error.message)
            self._refusal(persona.id, "rate_limited")
            return error
        return None

    @asynccontextmanager
    async def counted(
        self, persona: Persona | None, rest: str, method: Any, inner: dict[str, Any]
    ) -> AsyncIterator[Response | None]:
        """Hold a stream's place in the caller's open streams while it is served; refuse a
        send or stream over the caller's (or the persona's) running tasks."""
        kind = call_kind(rest, method)
        if kind is None or CALLER_KEY not in inner:
            yield None
            return
        caller = inner[CALLER_KEY]
        persona_id = persona.id if persona is not None else ""
        try:
            # The directory's answers are no tasks: only its streams count.
            if kind in ("send", "stream") and persona is not None:
                self._quotas.check_start(caller, persona_id, persona.limits.running_tasks or 0)
            if kind in ("stream", "subscribe"):
                with self._quotas.stream(caller):
                    yield None
                return
        except RateLimited as error:
            self._record("rate.refused", persona_id, inner, "429", error.message)
            self._refusal(persona_id, "rate_limited")
            yield _rate_limited(rest, error)
            return
        yield None

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

    def _refused(self, rest: str, error: AuthError) -> Response:
        """401 (with ``WWW-Authenticate``) or 403, in the binding's error shape."""
        assert self._auth is not None
        if error.status == 401:
            headers = {"WWW-Authenticate": self._auth.challenge(error)}
            return http_error(rest, 401, "UNAUTHENTICATED", error.message, headers)
        return http_error(rest, error.status, "PERMISSION_DENIED", error.message, {})


def _rate_limited(rest: str, error: RateLimited) -> Response:
    """429 with ``Retry-After``, in the binding's error shape."""
    headers = {"Retry-After": str(error.retry_after)}
    extra = {"retryAfter": error.retry_after}
    return http_error(rest, 429, "RESOURCE_EXHAUSTED", error.message, headers, extra)
