"""Authentication: who is calling, for A2A and the REST API alike.

A request's credential is ``Authorization: Bearer ...`` or ``X-API-Key: ...``. A bearer
that looks like a JWT is checked as an OpenID Connect token when an issuer is configured
(:mod:`persona_agent.security.oidc`); any other credential must be one of the API keys
(:mod:`persona_agent.security.api_keys`). Either way the caller becomes a :class:`Principal`,
whose name owns its tasks and conversations.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from persona_agent.security.api_keys import ApiKeys
from persona_agent.security.authorization import Authorization
from persona_agent.security.principal import (
    Access,
    AuthError,
    Principal,
)

if TYPE_CHECKING:  # imported by whoever configures an issuer: PyJWT and cryptography cost memory
    from persona_agent.security.oidc import OidcVerifier

__all__ = ["Authenticator", "credential_of"]


def credential_of(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, str] | None:
    """``(kind, credential)`` from ASGI headers: ``("bearer", token)`` or ``("key", key)``."""
    bearer = key = None
    for name, value in headers:
        if name == b"authorization" and bearer is None:
            scheme, _, rest = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and rest.strip():
                bearer = rest.strip()
        elif name == b"x-api-key" and key is None and value.strip():
            key = value.decode("latin-1").strip()
    if bearer is not None:
        return "bearer", bearer
    if key is not None:
        return "key", key
    return None


class Authenticator:
    """API keys and, optionally, an OIDC issuer; the hub's default A2A access."""

    def __init__(
        self,
        keys: ApiKeys | None = None,
        oidc: OidcVerifier | None = None,
        *,
        default_access: Access = "public",
    ) -> None:
        self.keys = keys or ApiKeys()
        self.oidc = oidc
        self.default_access: Access = default_access
        self.authorization = Authorization(enabled=self.enabled, default_access=default_access)
        """What the callers it authenticates may do."""

    @property
    def enabled(self) -> bool:
        """Whether any caller can authenticate at all."""
        return bool(len(self.keys)) or self.oidc is not None

    def challenge(self, error: AuthError | None = None) -> str:
        """The ``WWW-Authenticate`` header of a 401."""
        value = 'Bearer realm="persona-agent"'
        if error is not None and error.status == 401 and "required" not in error.message:
            value += ', error="invalid_token"'
        return value

    async def principal(self, headers: Iterable[tuple[bytes, bytes]]) -> Principal | None:
        """The caller, ``None`` if it presents no credential.

        Raises:
            AuthError: 401, a credential that is not valid.
        """
        found = credential_of(headers)
        if found is None:
            return None
        kind, credential = found
        if kind == "bearer" and self.oidc is not None and self.oidc.looks_like_jwt(credential):
            return await self.oidc.verify(credential)
        principal = self.keys.match(credential)
        if principal is None:
            raise AuthError(401, "The credential is not valid (an unknown API key or token)")
        return principal
