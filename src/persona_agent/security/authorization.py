"""Who may do what: the hub's one authorization decision (principal × action × persona).

Every door that runs or shows a persona for a caller asks :meth:`Authorization.refusal`
(or :meth:`Authorization.check`): the A2A router for direct calls, the personas' request
handler for every A2A method (direct, and the calls the hub makes for a caller:
consultations, panel members, a moderator's picks and synthesis), the REST API for each
persona it reads or writes, ``/metrics``, and the directory agent's answer.
Authentication (who the caller is) happens before, at the edge
(:class:`~persona_agent.security.authentication.Authenticator`); this module only decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from persona_agent.security.principal import (
    SCOPE_A2A,
    SCOPE_MEMORY_ADMIN,
    SCOPE_MEMORY_READ,
    SCOPE_MEMORY_WRITE,
    SCOPE_READ,
    SCOPE_WRITE,
    Access,
    AuthError,
    Principal,
)

__all__ = ["Access", "Action", "Authorization"]


class Action(StrEnum):
    """What a caller wants to do."""

    CALL = "call"
    """Talk to a persona: send, stream, its tasks, push configs, its extended card; also
    when the hub asks it for the caller (consultation, panel turn)."""
    READ = "read"
    """Read a persona through the REST API: it, its file, its card export, its usage."""
    WRITE = "write"
    """Create, replace, upload or delete a persona."""
    HUB_READ = "hub-read"
    """Read what is about every persona at once (``/metrics``)."""
    DIRECTORY = "directory"
    """Ask the hub's directory agent where the personas are."""
    MEMORY_READ = "memory-read"
    """List, search and export a caller's memories with a persona (REST)."""
    MEMORY_WRITE = "memory-write"
    """Edit or delete a caller's memories; forget everything a caller left (REST)."""


_SCOPES = {
    Action.CALL: SCOPE_A2A,
    Action.READ: SCOPE_READ,
    Action.WRITE: SCOPE_WRITE,
    Action.HUB_READ: SCOPE_READ,
    Action.DIRECTORY: SCOPE_A2A,
    Action.MEMORY_READ: SCOPE_MEMORY_READ,
    Action.MEMORY_WRITE: SCOPE_MEMORY_WRITE,
}
_A2A = frozenset({Action.CALL, Action.DIRECTORY})
_COLLECTIONS = frozenset({Action.READ, Action.WRITE, Action.MEMORY_READ, Action.MEMORY_WRITE})
"""Actions whose ``persona_id`` ``None`` is every persona at once, checked by scope only."""


class Authorization:
    """The decision, for a hub where callers can authenticate (``enabled``) or cannot.

    Without keys or an issuer nobody can authenticate: everything is allowed here (the
    REST API's keyless writes have rules of their own about where a request comes from:
    :class:`persona_agent.api.rest_auth.ApiAuth`). With them:

    - the REST API (``READ``, ``WRITE``, ``HUB_READ``) needs a principal: 401 without;
    - A2A (``CALL``, ``DIRECTORY``) needs one where the access is ``authenticated`` (the
      persona's ``access:``, else the hub's ``default_access``): 401 without;
    - a principal needs the action's scope (``a2a``, ``personas:read``,
      ``personas:write``, ``memory:read``, ``memory:write``): 403 without;
    - memory (``MEMORY_READ``, ``MEMORY_WRITE``) is a caller's own: naming another
      caller (``caller``) needs ``memory:admin`` too (403 without);
    - a principal whose key names personas may act on those only (403 for any other),
      and not at all on what concerns every persona (``HUB_READ``); it may ask the
      directory, which lists only its personas (:meth:`visible`).
    """

    def __init__(self, *, enabled: bool = False, default_access: Access = "public") -> None:
        self.enabled = enabled
        self.default_access: Access = default_access

    def refusal(
        self,
        principal: Principal | None,
        action: Action,
        persona_id: str | None = None,
        *,
        access: Access | None = None,
        caller: str | None = None,
    ) -> AuthError | None:
        """Why ``principal`` (``None``: anonymous) may not do ``action`` on ``persona_id``
        (``access``: that persona's own), or ``None`` if it may. For ``READ``, ``WRITE``
        and the memory actions, ``persona_id`` ``None`` is the collection (a list,
        filtered with :meth:`visible`; a file checked and not stored; a caller's memories
        with every persona): its scope is all it needs. ``caller``: whose memory a memory
        action is on (``None``: the principal's own)."""
        if not self.enabled:
            return None
        if principal is None:
            if action in _A2A and (access or self.default_access) == "public":
                return None
            return AuthError(
                401, "Authentication required (Authorization: Bearer ..., or X-API-Key)"
            )
        scope = _SCOPES[action]
        if scope not in principal.scopes:
            return AuthError(403, f"'{principal.name}' lacks the scope '{scope}'")
        if (
            caller is not None
            and caller != principal.name
            and SCOPE_MEMORY_ADMIN not in principal.scopes
        ):
            return AuthError(
                403,
                f"'{principal.name}' may manage its own memory only: naming another caller "
                f"needs the scope '{SCOPE_MEMORY_ADMIN}'",
            )
        allowed = principal.personas
        if allowed is None or action == Action.DIRECTORY:
            return None
        if persona_id is None and action in _COLLECTIONS:
            return None  # the collection (a list, a file checked): each persona is checked
        if action == Action.HUB_READ:
            return AuthError(
                403,
                f"'{principal.name}' may use some personas only; what is about every persona "
                "needs a key for them all",
            )
        if persona_id is None or persona_id not in allowed:
            return AuthError(403, f"'{principal.name}' may not use persona '{persona_id}'")
        return None

    def check(
        self,
        principal: Principal | None,
        action: Action,
        persona_id: str | None = None,
        *,
        access: Access | None = None,
        caller: str | None = None,
    ) -> None:
        """Raise the :meth:`refusal`, if there is one.

        Raises:
            AuthError: 401 (a principal is needed) or 403 (this one may not).
        """
        refused = self.refusal(principal, action, persona_id, access=access, caller=caller)
        if refused is not None:
            raise refused

    def visible(self, principal: Principal | None, persona_ids: Iterable[str]) -> list[str]:
        """Those of ``persona_ids`` a principal's key lets it use (all, for a principal
        without a list, an anonymous caller, or a hub without authentication)."""
        allowed = principal.personas if principal is not None and self.enabled else None
        if allowed is None:
            return list(persona_ids)
        return [persona_id for persona_id in persona_ids if persona_id in allowed]
