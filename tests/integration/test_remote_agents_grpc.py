"""An outside agent reached over gRPC: a persona of one hub calls a persona of another hub
whose card lists gRPC, the agents file preferring it (``bindings: [grpc]``), with an API key
sent as gRPC metadata. The other hub's metrics show the call came by gRPC."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import stream
from tests.integration.conftest import HubFactory
from tests.integration.test_metrics import scrape, total
from tests.integration.test_remote_agents import (
    HUB_B_KEY,
    caller_hub,
    card_url,
    other_hub,
    status_text_of,
    tool_results,
)

REQUESTS = "persona_agent_a2a_requests_total"


async def test_a_persona_calls_an_agent_over_grpc_with_its_key_in_the_metadata(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = json.dumps([{"name": "hub-a", "key": HUB_B_KEY}])
    monkeypatch.setenv("HUB_B_KEY", HUB_B_KEY)
    async with other_hub(
        hub_factory, tmp_path, api_keys=keys, a2a_access="authenticated", grpc_port=0
    ) as b:
        agents = {
            "socrates": {
                "card_url": card_url(b, "socrates"),
                "auth": {"api_key": "${HUB_B_KEY}"},
                "bindings": ["grpc", "jsonrpc"],
            }
        }
        async with caller_hub(hub_factory, tmp_path, agents) as a:
            llm.script(
                ToolCalls([("agent__socrates", {"message": "What is virtue?"})]),
                Reply("Virtue is knowledge."),  # Socrates, on hub B, over gRPC
                Reply("Socrates says virtue is knowledge."),  # Cal, on hub A
            )
            events = await stream(await a.client("caller", streaming=True), "Ask Socrates.")
        samples = await scrape(b, **{"X-API-Key": HUB_B_KEY})

    final = events[-1].status_update
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text_of(final.status.message) == "Socrates says virtue is knowledge."
    assert tool_results(llm.requests[-1]) == ["Virtue is knowledge."]
    by_grpc = total(samples, REQUESTS, persona="socrates", binding="grpc", outcome="ok")
    assert by_grpc >= 1, samples  # the call came over gRPC, with the key (the hub needs it)
    assert total(samples, REQUESTS, persona="socrates", binding="jsonrpc") == 0
