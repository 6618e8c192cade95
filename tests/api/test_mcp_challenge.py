"""``/mcp``'s 401 challenge (:func:`persona_agent.api.mcp.mcp_auth.mcp_challenge`): one header
line whatever the hub's message holds, with the metadata URL and scope only under OIDC."""

from __future__ import annotations

import re

from persona_agent.api.mcp.mcp_auth import mcp_challenge
from persona_agent.security.principal import AuthError

QUOTED = r'"(?:[^"\\]|\\.)*"'
"""An RFC 9110 quoted string."""
PARAM = re.compile(rf"\s*([a-z_]+)=({QUOTED}|[^\s,]+)\s*(?:,|$)")


def _params(challenge: str) -> dict[str, str]:
    scheme, _, rest = challenge.partition(" ")
    assert scheme == "Bearer"
    found: dict[str, str] = {}
    position = 0
    while position < len(rest):
        match = PARAM.match(rest, position)
        assert match, f"not a challenge parameter at {rest[position:]!r}"
        found[match[1]] = re.sub(r"\\(.)", r"\1", match[2].strip('"'))
        position = match.end()
    return found


def test_a_message_with_quotes_and_lines_stays_one_quoted_parameter() -> None:
    error = AuthError(401, 'The key "a\\b" is\nnot valid')
    challenge = mcp_challenge(error, None)
    assert "\n" not in challenge
    params = _params(challenge)
    assert params == {
        "realm": "persona-agent",
        "error": "invalid_token",
        "error_description": 'The key "a\\b" is not valid',
    }


def test_oidc_names_the_metadata_and_the_scope() -> None:
    url = "https://hub.example/.well-known/oauth-protected-resource/mcp"
    params = _params(mcp_challenge(AuthError(401, "Authentication required"), url))
    assert params["resource_metadata"] == url
    assert params["scope"] == "a2a"
    assert "error" not in params  # no credential is no invalid token (RFC 6750 §3.1)
