"""What ``/mcp`` tells a client that must sign in: the 401's challenge, and the OAuth
protected-resource metadata (RFC 9728) of ``/mcp`` when the hub takes OIDC tokens
(docs/mcp.md#who-may-call).

MCP clients that sign in (the MCP authorization specification) read the challenge's
``resource_metadata`` URL, or look for ``/.well-known/oauth-protected-resource/mcp`` and
then ``/.well-known/oauth-protected-resource``, to find the authorization server. With
an OIDC issuer configured the hub publishes both: ``resource`` is the public ``/mcp``
URL, ``authorization_servers`` the issuer, and the scope a tool call needs (``a2a``).

With API keys only there is nothing to sign in to: the 401 names no metadata, its
``error_description`` and its JSON-RPC body carry the hub's message (which header to
send). Clients that turn every 401 into an OAuth flow (the TypeScript SDK's, the MCP
Inspector's) still try one and find no metadata; docs/mcp.md shows how to give them the
key. Imports no part of the ``mcp`` SDK: a hub nobody asks over MCP loads none.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from persona_agent.security.principal import SCOPE_A2A, AuthError

__all__ = [
    "METADATA_PATH",
    "UNAUTHORIZED",
    "mcp_challenge",
    "metadata_routes",
    "public_url",
    "unauthorized",
]

METADATA_PATH = "/.well-known/oauth-protected-resource"
"""RFC 9728's well-known path; the document of ``/mcp`` also at ``METADATA_PATH + "/mcp"``."""
UNAUTHORIZED = -32001
"""The JSON-RPC error code of a 401's body (the MCP SDK's own server answers the same)."""
MCP_SCOPES = [SCOPE_A2A]
"""The scopes a token needs to call personas over ``/mcp`` (``scopes_supported``)."""
METADATA_CACHE_CONTROL = "public, max-age=3600"


def public_url(scope: Scope, public_base_url: str | None, path: str) -> str:
    """``path`` on the hub's public URL (``public_base_url``, else the request's own
    scheme and ``Host``, as a proxy passes them)."""
    if public_base_url:
        return public_base_url.rstrip("/") + path
    headers = {key.lower(): value for key, value in scope.get("headers") or ()}
    host = headers.get(b"host", b"").decode("latin-1")
    if not host:
        server = scope.get("server") or ("localhost", None)
        host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
    root = str(scope.get("root_path") or "").rstrip("/")
    return f"{scope.get('scheme', 'http')}://{host}{root}{path}"


def _quoted(text: str) -> str:
    """``text`` as an RFC 9110 quoted string (one line, quotes and backslashes escaped)."""
    flat = " ".join(text.split())[:300]
    return '"' + flat.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mcp_challenge(error: AuthError, metadata_url: str | None) -> str:
    """The ``WWW-Authenticate`` of ``/mcp``'s 401: a Bearer challenge (API keys are
    bearers too) with the hub's message as ``error_description``; with OIDC
    (``metadata_url``), where the protected-resource metadata is, and the scope."""
    parts = ['Bearer realm="persona-agent"']
    if metadata_url is not None:
        parts.append(f"resource_metadata={_quoted(metadata_url)}")
        parts.append(f"scope={_quoted(' '.join(MCP_SCOPES))}")
    if "required" not in error.message:
        parts.append('error="invalid_token"')
    parts.append(f"error_description={_quoted(error.message)}")
    return ", ".join(parts)


def unauthorized(error: AuthError, metadata_url: str | None) -> JSONResponse:
    """``/mcp``'s answer to a caller with no valid credential: the status, the challenge,
    and a JSON-RPC error carrying the hub's message (which MCP clients show)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": UNAUTHORIZED, "message": error.message}}
    headers = {"WWW-Authenticate": mcp_challenge(error, metadata_url)}
    return JSONResponse(body, status_code=error.status, headers=headers)


def metadata_routes(issuer: str, public_base_url: str | None, mcp_path: str) -> list[Route]:
    """The protected-resource metadata of ``/mcp``, at RFC 9728's path and at its
    ``/mcp``-suffixed form (§3.1), for tokens of ``issuer``."""

    async def metadata(request: Request) -> Response:
        document = {
            "resource": public_url(request.scope, public_base_url, mcp_path),
            "authorization_servers": [issuer.rstrip("/")],
            "bearer_methods_supported": ["header"],
            "scopes_supported": MCP_SCOPES,
            "resource_name": "persona-agent",
        }
        return JSONResponse(document, headers={"Cache-Control": METADATA_CACHE_CONTROL})

    return [
        Route(METADATA_PATH, endpoint=metadata, methods=["GET"]),
        Route(METADATA_PATH + mcp_path, endpoint=metadata, methods=["GET"]),
    ]
