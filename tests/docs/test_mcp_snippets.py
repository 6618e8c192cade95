"""docs/mcp.md's examples: the SDK client's program run as a reader pastes it (in the
sandbox, against a hub on a real uvicorn answering through the scripted fake LLM), and the
Claude Desktop configuration checked against the command and the settings it names."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator

import pytest

from persona_agent.cli.commands import app
from persona_agent.settings import Settings
from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub, HubFactory
from tests.servers.oidc_issuer import AUDIENCE, OidcIssuer

DOC = "docs/mcp.md"
CLIENT = claim(DOC, "from mcp.client import Client")
DESKTOP = claim(DOC, '"args": ["--directory"')
REMOTE = claim(DOC, '"args": ["mcp-remote"')
KEYS_CHALLENGE = claim(DOC, 'WWW-Authenticate: Bearer realm="persona-agent", error_description')
OIDC_CHALLENGE = claim(DOC, 'WWW-Authenticate: Bearer realm="persona-agent", resource_metadata')
ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:
    async with hub_factory(mcp_config=None) as running:
        yield running


async def test_the_sdk_client_example_asks_and_continues(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    llm.script(Reply("Courage is knowing what not to fear."), Reply("Wisdom knows it knows not."))
    program = sandbox.root / "ask.py"
    program.write_text(rewrite(CLIENT.text, {DOC_URL: hub.settings.base_url}), encoding="utf-8")
    ran = await asyncio.to_thread(sandbox.run, "uv run python ask.py")
    lines = ran.ok().stdout.splitlines()
    assert "'socrates'" in lines[0]
    assert lines[1:3] == ["Courage is knowing what not to fear.", "Wisdom knows it knows not."]
    assert lines[3].startswith("{")
    assert "What is courage?" in json.dumps(llm.requests[-1]["messages"])


def test_the_claude_desktop_configuration_names_the_command_and_settings() -> None:
    server = json.loads(DESKTOP.text)["mcpServers"]["personas"]
    assert server["command"] == "uv"
    args = server["args"]
    assert args[:2] == ["--directory", "/home/me/persona-agent"]
    assert args[2:] == ["run", "persona-agent", "mcp"]
    commands = {command.name for command in app.registered_commands}
    assert "mcp" in commands
    fields = {f"PERSONA_AGENT_{name.upper()}" for name in Settings.model_fields}
    assert set(server["env"]) <= fields


def test_the_remote_desktop_configuration_sends_the_key_as_the_hub_asks() -> None:
    """The mcp-remote bridge for a hub with keys: the key as a bearer header (the one the
    hub's 401 names), its value from ``env`` so no client splits it at the space."""
    server = json.loads(REMOTE.text)["mcpServers"]["personas"]
    assert server["command"] == "npx"
    args = server["args"]
    assert args[0] == "mcp-remote"
    assert args[1].endswith("/mcp")
    assert args[2:] == ["--header", "Authorization:${AUTH_HEADER}"]
    assert server["env"]["AUTH_HEADER"].startswith("Bearer ")


def _parameters(challenge: str) -> list[str]:
    """The names of a ``Bearer`` challenge's parameters, in order."""
    return re.findall(r'(\w+)="', challenge)


async def test_the_challenges_are_the_hubs(hub_factory: HubFactory, issuer: OidcIssuer) -> None:
    """The two 401 challenges the page shows: with keys only the hub's header as written;
    with an issuer the same parameters in the same order (the page's host is an example)."""
    keys = json.dumps([{"name": "alice", "key": "alice-key-0123456789abcdef"}])
    async with hub_factory(api_keys=keys, a2a_access="authenticated") as hub:
        refused = await hub.http.post("/mcp", json=LIST, headers=ACCEPT)
    shown = KEYS_CHALLENGE.text.strip().removeprefix("WWW-Authenticate: ")
    assert refused.headers["WWW-Authenticate"] == shown
    oidc = {"oidc_issuer": issuer.issuer, "oidc_audience": AUDIENCE, "a2a_access": "authenticated"}
    async with hub_factory(**oidc) as hub:
        refused = await hub.http.post("/mcp", json=LIST, headers=ACCEPT)
    page = OIDC_CHALLENGE.text.strip().removeprefix("WWW-Authenticate: ")
    assert _parameters(refused.headers["WWW-Authenticate"]) == _parameters(page)
