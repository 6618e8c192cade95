"""OpenID Connect / OAuth 2 bearer tokens (JWT), checked against the issuer's JWKS.

PyJWT does the cryptography: :class:`jwt.PyJWKClient` fetches and caches the issuer's
key set and refetches it when a token names a key it does not hold (the issuer rotated
its keys); ``jwt.decode`` checks the signature, ``iss``, ``aud``, ``exp`` (and ``nbf``,
``iat``) with a small leeway. Tokens naming unknown keys make at most
:data:`REFRESHES_PER_MINUTE` refetches a minute, so random ``kid`` values cannot make the
hub hammer the issuer.
The key set's URL is the issuer's discovery document's ``jwks_uri`` unless given.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import Any

import httpx
import jwt
from jwt import PyJWKClient, PyJWKClientError

from persona_agent.security.principal import AuthError, Principal, scope_set

__all__ = ["REFRESHES_PER_MINUTE", "OidcVerifier"]

logger = logging.getLogger(__name__)

REFRESHES_PER_MINUTE = 5
"""Fetches of the key set that tokens with unknown key ids may cause in a minute."""

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
"""Asymmetric algorithms only: a JWKS holds public keys (never ``none`` or ``HS*``)."""


class OidcVerifier:
    """Turns a bearer token into a :class:`Principal`, or refuses it (401)."""

    def __init__(
        self,
        issuer: str,
        audience: str,
        *,
        jwks_url: str | None = None,
        algorithms: tuple[str, ...] = ALGORITHMS,
        leeway: float = 30.0,
        timeout: float = 10.0,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.audience = audience
        self.algorithms = list(algorithms)
        self.leeway = leeway
        self.timeout = timeout
        self._jwks_url = jwks_url
        self._client: PyJWKClient | None = None
        self._refreshes: deque[float] = deque()
        self._lock = asyncio.Lock()

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @staticmethod
    def looks_like_jwt(credential: str) -> bool:
        """Three base64url parts: worth checking as a token (an API key is not)."""
        return credential.count(".") == 2 and credential.startswith("eyJ")

    async def verify(self, token: str) -> Principal:
        """The token's principal: ``oidc:{sub}``, with the token's scopes.

        Raises:
            AuthError: 401, saying why (expired, wrong audience, bad signature, ...).
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthError(401, "The bearer token is not a JWT") from None
        if header.get("alg") not in self.algorithms:
            raise AuthError(401, f"The token's algorithm {header.get('alg')!r} is not accepted")
        key = await self._key(header.get("kid"))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "sub", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise AuthError(401, "The token has expired") from None
        except jwt.InvalidAudienceError:
            raise AuthError(
                401, f"The token is not for this hub (audience {self.audience})"
            ) from None
        except jwt.InvalidIssuerError:
            raise AuthError(401, f"The token is not from the issuer {self.issuer}") from None
        except jwt.PyJWTError as error:
            raise AuthError(401, f"The token is not valid: {error}") from None
        subject = str(claims["sub"])
        scopes = scope_set(claims.get("scope")) | scope_set(claims.get("scp"))
        return Principal(f"oidc:{subject}", scopes=scopes, via="oidc")

    async def _key(self, kid: Any) -> Any:
        client = await self._jwk_client()
        try:
            keys = await asyncio.to_thread(client.get_jwk_set)
            found = _find(keys, kid)
            if found is None:
                async with self._lock:
                    now = time.monotonic()
                    while self._refreshes and now - self._refreshes[0] > 60:
                        self._refreshes.popleft()
                    if len(self._refreshes) < REFRESHES_PER_MINUTE:
                        self._refreshes.append(now)
                        keys = await asyncio.to_thread(client.get_jwk_set, True)
                        found = _find(keys, kid)
        except PyJWKClientError as error:
            logger.warning("Cannot fetch the issuer's keys: %s", error)
            raise AuthError(401, "The issuer's keys cannot be fetched; try again") from None
        if found is None:
            raise AuthError(401, "The token is signed with a key the issuer does not publish")
        return found.key

    async def _jwk_client(self) -> PyJWKClient:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                url = self._jwks_url or await self._discover()
                self._client = PyJWKClient(url, cache_jwk_set=True, lifespan=3600, timeout=30)
        return self._client

    async def _discover(self) -> str:
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as http:
                response = await http.get(self.discovery_url)
                response.raise_for_status()
                document = response.json()
        except (httpx.HTTPError, ValueError) as error:
            logger.warning("Cannot read %s: %s", self.discovery_url, error)
            raise AuthError(401, "The issuer's discovery document cannot be read") from None
        if document.get("issuer", "").rstrip("/") != self.issuer:
            raise AuthError(401, "The issuer's discovery document names another issuer")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise AuthError(401, "The issuer's discovery document has no jwks_uri")
        return jwks_uri


def _find(keys: Any, kid: Any) -> Any:
    for key in keys.keys:
        if kid is None or key.key_id == kid:
            return key
    return None
