"""The registry changes at run time: add, replace and remove reach A2A at once."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import TaskState

from persona_agent.a2a.registry import A2ARegistry
from persona_agent.api.app import HubApp
from persona_agent.personas.model import Persona
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send
from tests.integration.conftest import HERMIT, TRANSPORTS, Hub


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def registry(hub: Hub) -> A2ARegistry:
    assert isinstance(hub.app, HubApp)
    return hub.app.parts.registry


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_add_replace_remove_at_run_time(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    card_url = "/a2a/newcomer/.well-known/agent-card.json"
    assert (await hub.http.get(card_url)).status_code == 404

    registry(hub).put(Persona.from_data("newcomer", {**HERMIT, "name": "Nina Newcomer"}))
    assert (await hub.http.get(card_url)).json()["name"] == "Nina Newcomer"
    assert "newcomer" in {p["id"] for p in (await hub.http.get("/a2a/personas")).json()}
    llm.script(Reply("Hello, I am new here."))
    task = await send(await hub.client("newcomer", transport), "Who are you?")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "Hello, I am new here."

    registry(hub).put(Persona.from_data("newcomer", {**HERMIT, "name": "Nina Renamed"}))
    assert (await hub.http.get(card_url)).json()["name"] == "Nina Renamed"
    await send(await hub.client("newcomer", transport), "And now?")
    assert "Nina Renamed" in llm.requests[-1]["messages"][0]["content"]

    assert registry(hub).remove("newcomer")
    assert (await hub.http.get(card_url)).status_code == 404
    assert (await hub.http.post("/a2a/newcomer/", json={})).status_code == 404
    assert "newcomer" not in {p["id"] for p in (await hub.http.get("/a2a/personas")).json()}
    assert not registry(hub).remove("newcomer")
