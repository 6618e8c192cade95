"""The worked examples of docs/collaboration.md#panels, run as a reader pastes them (in the
sandbox, against a hub on a real uvicorn answering through the scripted fake LLM): one
panel of each mode on the bundled personas, each answer printed under its member's name."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.docs.sandbox import DOC_URL, Ran, Sandbox, rewrite
from tests.docs.snippets import REPO, Snippet, claim, commands
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub, HubFactory

DOC = "docs/collaboration.md"
BROADCAST = claim(DOC, "/a2a/science-panel/message:send")
TABLE = claim(DOC, "persona-agent personas create examples/machines-table.yaml")
FORUM = claim(DOC, "persona-agent personas create examples/science-forum.yaml")
TABLE_FILE = claim(DOC, "# examples/machines-table.yaml")
FORUM_FILE = claim(DOC, "# examples/science-forum.yaml")
BUNDLED_FILE = claim(DOC, "# personas/science-panel.yaml")


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:
    async with hub_factory(mcp_config=None) as running:
        yield running


async def run(sandbox: Sandbox, command: str, **kwargs: Any) -> Ran:
    return await asyncio.to_thread(sandbox.run, command, **kwargs)


def here(hub: Hub, command: str) -> str:
    return rewrite(command, {DOC_URL: hub.settings.base_url})


@pytest.mark.parametrize(
    ("snippet", "path"),
    [
        (TABLE_FILE, "examples/machines-table.yaml"),
        (FORUM_FILE, "examples/science-forum.yaml"),
        (BUNDLED_FILE, "personas/science-panel.yaml"),
    ],
)
def test_the_panels_shown_are_the_files(snippet: Snippet, path: str) -> None:
    """The docs show each file as it is (its comment lines aside)."""
    lines = (REPO / path).read_text(encoding="utf-8").splitlines()
    body = [line for line in lines if not line.startswith("#")]
    shown = [line for line in snippet.text.splitlines() if not line.startswith("#")]
    assert shown == body


async def test_the_broadcast_example_prints_the_three_answers(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    (curl,) = commands(BROADCAST)
    for name in ("Albert Einstein", "Marie Curie", "Charles Darwin"):
        llm.script_for(f"You are {name}.", Reply(f"{name} on experiments."))
    printed = (await run(sandbox, here(hub, curl))).ok().stdout
    for name in ("Albert Einstein", "Marie Curie", "Charles Darwin"):
        assert f"== {name}\n{name} on experiments.\n" in printed


async def test_the_round_table_example_prints_each_turn(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    create, curl = commands(TABLE)
    env = {"PERSONA_AGENT_URL": hub.settings.base_url}
    created = (await run(sandbox, create, env=env)).ok().stdout
    assert created.startswith("Created 'machines-table' (")  # one line
    llm.script(Reply("S1."), Reply("A1."), Reply("S2."), Reply("A2."))
    printed = (await run(sandbox, here(hub, curl))).ok().stdout
    assert printed.split("\n\n")[:4] == [
        "== Socrates, round 1\nS1.",
        "== Ada Lovelace, round 1\nA1.",
        "== Socrates, round 2\nS2.",
        "== Ada Lovelace, round 2\nA2.",
    ]


async def test_the_moderated_example_prints_the_turns_and_the_synthesis(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    create, curl = commands(FORUM)
    env = {"PERSONA_AGENT_URL": hub.settings.base_url}
    created = (await run(sandbox, create, env=env)).ok().stdout
    assert created.startswith("Created 'science-forum' (")  # one line
    llm.script(
        Reply("marie-curie"),
        Reply("Curie: from patient measurement."),
        Reply("DONE"),
        Reply("Ideas come from looking closely."),
    )
    printed = (await run(sandbox, here(hub, curl))).ok().stdout
    assert printed.split("\n\n")[:2] == [
        "== Marie Curie\nCurie: from patient measurement.",
        "== synthesis\nIdeas come from looking closely.",
    ]
