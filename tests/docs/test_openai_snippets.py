"""docs/openai.md's examples: the ``openai`` client's program run as a reader pastes it (in
the sandbox, against a hub on a real uvicorn answering through the scripted fake LLM), the
error shape compared with the hub's own answer, and LibreChat's endpoint checked against
the routes it names."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import yaml

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub, HubFactory

DOC = "docs/openai.md"
CLIENT = claim(DOC, "from openai import OpenAI")
ERROR = claim(DOC, '"code": "model_not_found"')
LIBRECHAT = claim(DOC, "modelDisplayLabel")


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:
    async with hub_factory(mcp_config=None) as running:
        yield running


async def test_the_client_example_lists_asks_and_streams(
    sandbox: Sandbox, hub: Hub, llm: FakeLLM
) -> None:
    llm.script(Reply("Courage is knowing what not to fear."), Reply("Wisdom knows it knows not."))
    program = sandbox.root / "ask.py"
    program.write_text(rewrite(CLIENT.text, {DOC_URL: hub.settings.base_url}), encoding="utf-8")
    ran = await asyncio.to_thread(sandbox.run, "uv run python ask.py")
    lines = ran.ok().stdout.splitlines()
    assert "'socrates'" in lines[0]
    assert lines[1] == "Courage is knowing what not to fear."
    assert lines[2] == "Wisdom knows it knows not."
    assert lines[3].endswith("tokens)")
    # The second request carried the conversation the program kept.
    said = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] != "system"]
    assert said == ["What is courage?", "Courage is knowing what not to fear.", "And wisdom?"]


async def test_the_error_shape_is_the_hubs(hub: Hub) -> None:
    documented = json.loads(ERROR.text)
    answer = await hub.http.post(
        "/v1/chat/completions",
        json={"model": "no-such-persona", "messages": [{"role": "user", "content": "Hi"}]},
    )
    assert answer.status_code == 404
    assert answer.json() == documented


def test_the_librechat_endpoint_lists_the_personas_from_the_door() -> None:
    endpoint = yaml.safe_load(LIBRECHAT.text)["endpoints"]["custom"][0]
    assert endpoint["baseURL"].endswith("/v1")
    assert endpoint["models"]["fetch"] is True
    assert endpoint["titleConvo"] is False
