"""The outside-agents example of docs/collaboration.md: two hubs from one clone, hub A
calling hub B's Socrates with hub B's API key. The two ``serve`` lines are started as the
test's hubs (on free ports, with the settings the lines give them); the files are the
repository's, the other commands run in the docs sandbox as a reader pastes them."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from persona_agent.collab.agents_file import load_agents_config
from persona_agent.personas.loader import load_persona_file
from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import REPO, claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.conftest import BUNDLED, HubFactory

DOC = "docs/collaboration.md"
TWO_HUBS = claim(DOC, "examples/two-hubs-agents.yaml uv run persona-agent serve")


def settings_of(command: str) -> dict[str, str]:
    """The ``NAME=value`` assignments a command line starts with."""
    return dict(re.findall(r"(?:^|\s)([A-Z_]+)=(\S+)", command.split(" uv run ")[0]))


async def test_hub_a_calls_hub_bs_socrates_with_hub_bs_key(
    sandbox: Sandbox,
    hub_factory: HubFactory,
    llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    serve_b, serve_a, create, chat = expect(
        TWO_HUBS,
        "PERSONA_AGENT_PORT=8001",
        "HUB_B_KEY=",
        "uv run persona-agent personas create examples/envoy.yaml",
        "uv run persona-agent chat envoy --url",
    )
    b, a = settings_of(serve_b), settings_of(serve_a)
    assert b["PERSONA_AGENT_API_KEYS"] == a["HUB_B_KEY"]
    assert load_persona_file(REPO / "examples" / "envoy.yaml").agents == ["socrates-b"]
    b_personas = tmp_path / "b-personas"
    shutil.copytree(BUNDLED, b_personas)
    async with hub_factory(
        personas_dir=b_personas,
        data_dir=tmp_path / "b-data",
        api_keys=b["PERSONA_AGENT_API_KEYS"],
        mcp_config=None,
    ) as hub_b:
        # The repository's agents file, pointed at hub B's port.
        shown = (REPO / a["PERSONA_AGENT_AGENTS_FILE"]).read_text(encoding="utf-8")
        agents_file = tmp_path / "agents.yaml"
        agents_file.write_text(rewrite(shown, {"http://127.0.0.1:8001": hub_b.settings.base_url}))
        loaded = load_agents_config(agents_file, {"HUB_B_KEY": a["HUB_B_KEY"]})
        assert list(loaded.agents) == ["socrates-b"]
        monkeypatch.setenv("HUB_B_KEY", a["HUB_B_KEY"])  # hub A reads it as it starts
        async with hub_factory(agents_file=agents_file, mcp_config=None) as hub_a:
            env = {"PERSONA_AGENT_URL": hub_a.settings.base_url}
            created = await asyncio.to_thread(sandbox.run, create, env=env)
            assert created.ok().stdout.startswith("Created 'envoy' (")  # one line
            llm.script(
                ToolCalls([("agent__socrates-b", {"message": "What is virtue?"})]),
                Reply("Let us first ask what virtue is not."),
                Reply("Socrates answered with a question, as ever."),
            )
            talk = rewrite(chat, {DOC_URL: hub_a.settings.base_url})
            ran = await asyncio.to_thread(sandbox.run, talk, stdin="What is virtue?\n")
    printed = ran.ok().stdout
    assert "[socrates-b:]\nLet us first ask what virtue is not." in printed
    assert "The Envoy: Socrates answered with a question, as ever." in printed
    # Hub B's Socrates answered the question, called with hub B's key.
    asked = [r for r in llm.requests if r["messages"][-1]["content"] == "What is virtue?"]
    assert any("You are Socrates." in str(r["messages"][0]["content"]) for r in asked)
