"""The consultation example of docs/collaboration.md, run as a reader pastes it (in the
sandbox, against a hub on a real uvicorn answering through the scripted fake LLM): the salon
host is added, and in the terminal chat it consults Socrates, whose answer streams in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from persona_agent.personas.loader import load_persona_file
from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import REPO, claim, commands
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.conftest import Hub, HubFactory

DOC = "docs/collaboration.md"
SALON = claim(DOC, "persona-agent personas create examples/salon-host.yaml")


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:
    async with hub_factory(mcp_config=None) as running:
        yield running


def test_the_salon_host_consults_the_personas_the_docs_name() -> None:
    host = load_persona_file(REPO / "examples" / "salon-host.yaml")
    assert host.consult == ["socrates", "ada-lovelace", "marie-curie"]
    for persona_id in host.consult:
        assert (REPO / "personas" / f"{persona_id}.yaml").is_file()


async def test_the_salon_host_is_added_and_consults_in_the_chat(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    create, chat = commands(SALON)
    env = {"PERSONA_AGENT_URL": hub.settings.base_url}
    created = await asyncio.to_thread(sandbox.run, create, env=env)
    assert created.ok().stdout.startswith("Created 'salon-host' (")  # one line
    llm.script(
        ToolCalls([("consult__socrates", {"question": "Can a machine think?"})]),
        Reply("First tell me what thinking is."),
        Reply("Socrates would first ask what thinking is."),
    )
    talk = rewrite(chat, {DOC_URL: hub.settings.base_url})
    ran = await asyncio.to_thread(sandbox.run, talk, stdin="Can a machine think?\n")
    printed = ran.ok().stdout
    assert "[socrates:]\nFirst tell me what thinking is." in printed
    assert "Madame Geoffrin: Socrates would first ask what thinking is." in printed
