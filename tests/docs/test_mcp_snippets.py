"""docs/mcp.md's examples: the SDK client's program run as a reader pastes it (in the
sandbox, against a hub on a real uvicorn answering through the scripted fake LLM), and the
Claude Desktop configuration checked against the command and the settings it names."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from persona_agent.cli.commands import app
from persona_agent.settings import Settings
from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub, HubFactory

DOC = "docs/mcp.md"
CLIENT = claim(DOC, "from mcp.client import Client")
DESKTOP = claim(DOC, '"mcpServers"')


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
