"""A small, real OpenID Connect issuer for the tests: discovery and JWKS over HTTP on
127.0.0.1 (uvicorn in a thread), tokens signed with its own RSA keys by PyJWT.

    with OidcIssuer() as issuer:
        token = issuer.token("alice", scopes=["a2a"])
        issuer.rotate()  # a new key: the hub must fetch the key set again

It is an OAuth 2 token endpoint too (``POST /token``, the client credentials grant, the
client authenticated by HTTP Basic or in the form): :attr:`OidcIssuer.clients` holds the
clients (id → secret); a token's subject is the client id.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, unquote_plus

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from starlette.types import Receive, Scope, Send

from tests.servers.threaded import ServedInThread

__all__ = ["AUDIENCE", "OidcIssuer"]

AUDIENCE = "persona-agent-tests"


class OidcIssuer(ServedInThread):
    """An issuer with one signing key at first; :meth:`rotate` adds a new one."""

    label = "OIDC issuer"

    def __init__(self) -> None:
        self._keys: list[tuple[str, rsa.RSAPrivateKey]] = []
        self.jwks_requests = 0
        self.clients: dict[str, str] = {}
        """OAuth 2 clients of the token endpoint: id → secret."""
        self.token_requests = 0
        self.rotate()

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def kid(self) -> str:
        """The key id tokens are signed with (the newest key)."""
        return self._keys[-1][0]

    def rotate(self) -> str:
        """Add a new signing key and sign with it from now on; its key id."""
        kid = uuid.uuid4().hex[:8]
        self._keys.append((kid, rsa.generate_private_key(public_exponent=65537, key_size=2048)))
        return kid

    def token(
        self,
        subject: str,
        *,
        scopes: list[str] | None = None,
        audience: str = AUDIENCE,
        issuer: str | None = None,
        expires_in: float = 300,
        kid: str | None = None,
        foreign_key: bool = False,
        **claims: Any,
    ) -> str:
        """A signed JWT. ``foreign_key``: signed with a key the issuer does not publish."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience,
            "iat": now,
            "exp": now + int(expires_in),
            **claims,
        }
        if scopes is not None:
            payload["scope"] = " ".join(scopes)
        key_id, key = self._keys[-1]
        if foreign_key:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return jwt.encode(payload, key, algorithm="RS256", headers={"kid": kid or key_id})

    # -- serving ------------------------------------------------------------------------------

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == "/.well-known/openid-configuration":
            body: dict[str, Any] = {
                "issuer": self.issuer,
                "jwks_uri": f"{self.issuer}/jwks.json",
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        elif path == "/jwks.json":
            self.jwks_requests += 1
            body = {"keys": [self._public_jwk(kid, key) for kid, key in self._keys]}
        elif path == "/token" and scope["method"] == "POST":
            status, body = self._client_credentials(scope, await _body(receive))
            await _send(send, status, body)
            return
        else:
            await _send(send, 404, {"error": "not found"})
            return
        await _send(send, 200, body)

    def _client_credentials(self, scope: Scope, body: bytes) -> tuple[int, dict[str, Any]]:
        """The client credentials grant (RFC 6749, 4.4)."""
        self.token_requests += 1
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client_id, secret = form.get("client_id"), form.get("client_secret")
        basic = headers.get("authorization", "")
        if basic.startswith("Basic "):
            pair = base64.b64decode(basic.removeprefix("Basic ")).decode()
            client_id, _, secret = (unquote_plus(part) for part in pair.partition(":"))
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if client_id is None or self.clients.get(client_id) != secret:
            return 401, {"error": "invalid_client", "error_description": "unknown client"}
        scopes = form.get("scope", "").split()
        token = self.token(client_id, scopes=scopes, audience=form.get("audience", AUDIENCE))
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": 300}

    @staticmethod
    def _public_jwk(kid: str, key: rsa.RSAPrivateKey) -> dict[str, Any]:
        jwk: dict[str, Any] = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        return {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
