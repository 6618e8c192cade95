"""What ``/mcp`` tells an MCP client that must sign in (docs/mcp.md#who-may-call): with an
OIDC issuer, the protected-resource metadata (RFC 9728) the MCP authorization
specification has clients discover, found by the ``mcp`` SDK's own discovery; with API
keys only, no metadata, and a 401 whose message the SDK's client raises as it is."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
)
from mcp.client.client import ConnectMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import ProtectedResourceMetadata
from mcp.shared.exceptions import MCPError

from tests.integration.conftest import Hub, HubFactory
from tests.servers.oidc_issuer import AUDIENCE, OidcIssuer

KEY = "alice-key-0123456789abcdef"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (no persona here calls a tool)."""
    return None


async def _list_tools(hub: Hub, mode: ConnectMode, **headers: str) -> set[str]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(f"{hub.settings.base_url}/mcp", http_client=http),
            cache=None,
            mode=mode,
        ) as client,
    ):
        return {tool.name for tool in (await client.list_tools()).tools}


async def _refusal(hub: Hub, mode: ConnectMode, **headers: str) -> MCPError:
    """The error the SDK's client raises on connecting (inside its task group's
    exception groups, as it raises it)."""
    with pytest.raises((MCPError, BaseExceptionGroup)) as raised:
        await _list_tools(hub, mode, **headers)
    error: BaseException = raised.value
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(raised.value)
    return error


async def test_with_oidc_clients_find_where_to_sign_in(
    hub_factory: HubFactory, issuer: OidcIssuer
) -> None:
    settings = {
        "oidc_issuer": issuer.issuer,
        "oidc_audience": AUDIENCE,
        "a2a_access": "authenticated",
    }
    async with hub_factory(**settings) as hub:
        base = hub.settings.base_url
        refused = await hub.http.post("/mcp", json=LIST, headers=ACCEPT)
        assert refused.status_code == 401
        assert refused.json()["error"]["message"].startswith("Authentication required")
        # The SDK's client reads the challenge and tries the URLs in its order.
        answer = httpx2.Response(401, headers=dict(refused.headers))
        pointed = extract_resource_metadata_from_www_auth(answer)
        assert pointed == f"{base}/.well-known/oauth-protected-resource/mcp"
        assert extract_scope_from_www_auth(answer) == "a2a"
        urls = build_protected_resource_metadata_discovery_urls(pointed, f"{base}/mcp")
        assert urls[-1] == f"{base}/.well-known/oauth-protected-resource"
        for url in urls:
            response = await hub.http.get(url)
            assert response.status_code == 200, url
            assert "max-age" in response.headers["Cache-Control"]
            metadata = ProtectedResourceMetadata.model_validate_json(response.content)
            assert str(metadata.resource) == f"{base}/mcp"
            assert [str(server).rstrip("/") for server in metadata.authorization_servers] == [
                issuer.issuer.rstrip("/")
            ]
            assert metadata.bearer_methods_supported == ["header"]
            assert metadata.scopes_supported == ["a2a"]

        # A token that is not valid: the challenge says so, and still where to sign in.
        expired = issuer.token("alice", scopes=["a2a"], expires_in=-120)
        stale = await hub.http.post(
            "/mcp", json=LIST, headers={**ACCEPT, "Authorization": f"Bearer {expired}"}
        )
        assert stale.status_code == 401
        challenge = stale.headers["WWW-Authenticate"]
        assert 'error="invalid_token"' in challenge
        assert "resource_metadata=" in challenge

        # Signed in: the token's caller lists the tools, in both eras.
        token = issuer.token("alice", scopes=["a2a"])
        for mode in ("legacy", "auto"):
            tools = await _list_tools(hub, mode, Authorization=f"Bearer {token}")
            assert "socrates" in tools


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_with_keys_only_clients_show_the_hubs_message(
    hub_factory: HubFactory, mode: ConnectMode
) -> None:
    keys = json.dumps([{"name": "alice", "key": KEY}])
    async with hub_factory(api_keys=keys, a2a_access="authenticated") as hub:
        # Nothing to sign in to: no metadata, and a challenge that names none.
        for path in ("", "/mcp"):
            metadata = await hub.http.get(f"/.well-known/oauth-protected-resource{path}")
            assert metadata.status_code == 404
        refused = await hub.http.post("/mcp", json=LIST, headers=ACCEPT)
        assert refused.status_code == 401
        challenge = refused.headers["WWW-Authenticate"]
        assert challenge.startswith('Bearer realm="persona-agent"')
        assert "resource_metadata" not in challenge
        assert "error_description=" in challenge
        assert "X-API-Key" in challenge

        # The SDK's client raises the hub's message (no OAuth flow, no stand-in text).
        missing = await _refusal(hub, mode)
        assert "Authentication required" in str(missing)
        assert "X-API-Key" in str(missing)
        wrong = await _refusal(hub, mode, Authorization="Bearer not-a-key-of-this-hub")
        assert "not valid" in str(wrong)
        # The key as a bearer, or in X-API-Key, as docs/mcp.md shows.
        assert "socrates" in await _list_tools(hub, mode, Authorization=f"Bearer {KEY}")
        assert "socrates" in await _list_tools(hub, mode, **{"X-API-Key": KEY})
