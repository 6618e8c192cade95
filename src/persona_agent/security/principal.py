"""Who is calling: a principal, its scopes, and the errors of authentication."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from starlette.authentication import BaseUser

__all__ = [
    "KNOWN_SCOPES",
    "SCOPES",
    "SCOPE_A2A",
    "SCOPE_MEMORY_ADMIN",
    "SCOPE_MEMORY_READ",
    "SCOPE_MEMORY_WRITE",
    "SCOPE_READ",
    "SCOPE_WRITE",
    "Access",
    "AuthError",
    "Principal",
]

Access = Literal["public", "authenticated"]
"""Who may talk to a persona over A2A: anyone, or authenticated callers only."""

SCOPE_A2A = "a2a"
"""Talk to personas over A2A (send messages; get, list, cancel, subscribe to own tasks)."""
SCOPE_READ = "personas:read"
"""Read personas through the REST API."""
SCOPE_WRITE = "personas:write"
"""Create, change and delete personas through the REST API."""
SCOPE_MEMORY_READ = "memory:read"
"""List, search and export one's own memories with the personas (docs/memory.md)."""
SCOPE_MEMORY_WRITE = "memory:write"
"""Edit and delete one's own memories, and forget everything one left with the hub."""
SCOPE_MEMORY_ADMIN = "memory:admin"
"""Name another caller in the memory routes (``caller=``): an operator's. Never a default:
an entry or a token must list it."""
SCOPES = (SCOPE_A2A, SCOPE_READ, SCOPE_WRITE, SCOPE_MEMORY_READ, SCOPE_MEMORY_WRITE)
"""The scopes a key has when its entry lists none."""
KNOWN_SCOPES = (*SCOPES, SCOPE_MEMORY_ADMIN)
"""The scopes an entry may list."""


class AuthError(Exception):
    """A request is refused: ``status`` 401 (no valid credentials) or 403 (valid, but not
    allowed). ``message`` is safe to show: it never repeats a credential."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class Principal(BaseUser):
    """An authenticated caller: an API key's name, or an OIDC token's subject.

    It is the Starlette user of the request (``scope["user"]``), which the SDK turns into
    the ``ServerCallContext.user`` whose name owns tasks and conversations.
    """

    name: str
    """Unique among principals: ``key:{name}`` for an API key, ``oidc:{sub}`` for a token."""
    scopes: frozenset[str] = frozenset(SCOPES)
    personas: frozenset[str] | None = None
    """The personas it may use; ``None``: all."""
    via: str = "api-key"
    """How it authenticated: ``api-key`` or ``oidc``."""
    details: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.name

    @property
    def identity(self) -> str:
        return self.name


def scope_set(scopes: Iterable[str] | str | None) -> frozenset[str]:
    """Scopes from a list, or from OAuth's space-separated string."""
    if scopes is None:
        return frozenset()
    if isinstance(scopes, str):
        return frozenset(scopes.split())
    return frozenset(str(scope) for scope in scopes)
