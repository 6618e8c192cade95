"""Personas consulting each other: a tool per persona, each call a real A2A task of the
persona consulted, run in process through the hub's request handler."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import CancelTaskRequest, StreamResponse, TaskState
from a2a.utils.errors import A2AError

from tests.fakes.fake_llm import FakeLLM, Hang, Reply, ToolCalls
from tests.integration import persona_yaml
from tests.integration.a2a_helpers import (
    answer_text,
    get_task,
    send,
    stream,
    submit,
    wait_for_state,
)
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory
from tests.integration.persona_yaml import write


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def persona(name: str, **extra: Any) -> dict[str, Any]:
    return persona_yaml.persona(name, "consultation", **extra)


@pytest.fixture
def team(personas_dir: Path) -> Path:
    """alpha consults beta; beta consults alpha and gamma; gamma consults delta."""
    write(personas_dir, "alpha", persona("Alpha", consult=["beta"]))
    write(personas_dir, "beta", persona("Beta", consult=["alpha", "gamma"]))
    write(personas_dir, "gamma", persona("Gamma", consult=["delta"]))
    write(personas_dir, "delta", persona("Delta"))
    return personas_dir


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def data_parts(events: list[StreamResponse], kind: str) -> list[dict[str, Any]]:
    found = []
    for event in events:
        if event.HasField("status_update"):
            for part in event.status_update.status.message.parts:
                if part.HasField("data") and part.data.struct_value["kind"] == kind:
                    found.append(dict(part.data.struct_value.items()))
    return found


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_consultation_is_a_task_of_its_own_streamed_back_to_the_caller(
    team: Path, hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script(
        ToolCalls([("consult__beta", {"question": "What do you think of tests?"})]),
        Reply("Tests are how we know."),
        Reply("Beta says: tests are how we know."),
    )
    client = await hub.client("alpha", transport, streaming=True)
    events = await stream(client, "Ask Beta about tests.")

    outer = events[-1].status_update
    assert outer.status.state == TaskState.TASK_STATE_COMPLETED
    first, inner, last = llm.requests[-3:]
    offered = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(offered) == {"consult__beta"}
    assert offered["consult__beta"]["description"].startswith("Ask Beta (Beta, a test persona.")
    assert inner["messages"][-1] == {"role": "user", "content": "What do you think of tests?"}
    assert tool_results(last) == ["Tests are how we know."]
    # Beta's answer reached the caller as it streamed, naming the task that answered.
    progress = data_parts(events, "tool-progress")
    assert progress, "no progress of the consultation"
    assert {p["tool"] for p in progress} == {"consult__beta"}
    beta_task_id = progress[0]["taskId"]
    assert {p["persona"] for p in progress} == {"beta"}
    (result,) = data_parts(events, "tool-result")
    assert result["taskId"] == beta_task_id
    assert result["isError"] is False
    assert result["durationMs"] > 0
    # The consultation is Beta's own task, for the same caller, linked to the asking task.
    # (Read over 1.0: the SDK's HTTP+JSON 0.3 binding drops referenceTaskIds from tasks.)
    beta = await hub.client("beta")
    task = await get_task(beta, beta_task_id)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "Tests are how we know."
    assert list(task.history[0].reference_task_ids) == [outer.task_id]


async def test_a_loop_of_consultations_ends_with_a_tool_error(
    team: Path, hub: Hub, llm: FakeLLM
) -> None:
    llm.script(
        ToolCalls([("consult__beta", {"question": "Ask Alpha back."})]),
        ToolCalls([("consult__alpha", {"question": "Round we go?"})]),
        Reply("Beta answers alone."),
        Reply("Alpha answers."),
    )
    client = await hub.client("alpha")
    async with asyncio.timeout(60):
        task = await send(client, "Start a loop.")

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "Alpha answers."
    beta_final = llm.requests[-2]
    (refusal,) = tool_results(beta_final)
    assert refusal.startswith("Error: Consulting alpha would go round in a loop")
    assert "alpha → beta → alpha" in refusal
    assert tool_results(llm.requests[-1]) == ["Beta answers alone."]


async def test_consultations_stop_at_the_depth_limit(
    team: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(
        ToolCalls([("consult__gamma", {"question": "Go deeper."})]),  # beta asks gamma
        ToolCalls([("consult__delta", {"question": "Deeper still."})]),  # gamma asks delta
        Reply("Gamma stops here."),
        Reply("Beta heard gamma."),
    )
    # beta → gamma is one deep; gamma → delta would be two.
    async with hub_factory(consult_depth=1) as hub:
        task = await send(await hub.client("beta"), "Ask down the line.")

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "Beta heard gamma."
    gamma_final, beta_final = llm.requests[-2:]
    assert tool_results(gamma_final) == [
        "Error: Consultations may go 1 deep (beta → gamma): answer without consulting delta"
    ]
    assert tool_results(beta_final) == ["Gamma stops here."]


async def test_two_deep_is_allowed_by_default(team: Path, hub: Hub, llm: FakeLLM) -> None:
    llm.script(
        ToolCalls([("consult__gamma", {"question": "Go deeper."})]),
        ToolCalls([("consult__delta", {"question": "Deeper still."})]),
        Reply("Delta, at the bottom."),
        Reply("Gamma heard delta."),
        Reply("Beta heard gamma."),
    )
    task = await send(await hub.client("beta"), "Ask down the line.")

    assert answer_text(task) == "Beta heard gamma."
    assert tool_results(llm.requests[-2]) == ["Delta, at the bottom."]


async def test_canceling_the_asking_task_cancels_the_consultation(
    team: Path, hub: Hub, llm: FakeLLM
) -> None:
    llm.script(ToolCalls([("consult__beta", {"question": "Take your time."})]), Hang())
    alpha = await hub.client("alpha")
    task_id = await submit(alpha, "Ask Beta something slow.")
    await asyncio.to_thread(llm.wait_requests, 2)  # beta's model call is under way
    beta = await hub.client("beta")
    listed = await hub.http.get("/a2a/beta/tasks")
    (beta_task,) = listed.json()["tasks"]

    await alpha.cancel_task(CancelTaskRequest(id=task_id))
    await wait_for_state(beta, beta_task["id"], TaskState.TASK_STATE_CANCELED)
    await asyncio.to_thread(llm.wait_disconnect, 5.0)  # beta's model call was closed
    outer = await wait_for_state(alpha, task_id, TaskState.TASK_STATE_CANCELED)
    assert outer.status.state == TaskState.TASK_STATE_CANCELED


async def test_the_card_says_whom_a_persona_consults(team: Path, hub: Hub) -> None:
    card = await hub.card("beta")
    conversation = card.skills[0]
    assert conversation.description.endswith(
        "It may consult these personas of this hub: alpha, gamma."
    )
    assert {"consults:alpha", "consults:gamma"} <= set(conversation.tags)


async def test_only_served_personas_are_offered_and_unknown_names_are_refused(
    team: Path, hub: Hub, llm: FakeLLM
) -> None:
    removed = await hub.http.delete("/api/v1/personas/gamma")
    assert removed.status_code == 204
    llm.script(ToolCalls([("consult__gamma", {"question": "Still there?"})]), Reply("Alone."))
    task = await send(await hub.client("beta"), "Ask gamma.")

    assert answer_text(task) == "Alone."
    first, last = llm.requests[-2:]
    assert {tool["function"]["name"] for tool in first["tools"]} == {"consult__alpha"}
    assert tool_results(last) == ["Error: No persona 'gamma' to consult"]


async def test_a_consultation_without_a_question_is_a_tool_error(
    team: Path, hub: Hub, llm: FakeLLM
) -> None:
    llm.script(ToolCalls([("consult__beta", {"q": "wrong key"})]), Reply("Fine."))
    task = await send(await hub.client("alpha"), "Ask badly.")

    assert answer_text(task) == "Fine."
    assert tool_results(llm.requests[-1]) == [
        "Error: consult__beta needs a 'question': the text to ask Beta"
    ]


ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"
CAROL = "carol-key-0123456789abcdef"


async def test_a_consultation_is_made_for_the_caller_and_only_where_it_may_go(
    team: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    keys = [
        {"name": "alice", "key": ALICE, "personas": ["alpha"]},
        {"name": "bob", "key": BOB},
        {"name": "carol", "key": CAROL},
    ]
    async with (
        hub_factory(api_keys=json.dumps(keys), a2a_access="authenticated") as hub,
        httpx.AsyncClient(base_url=hub.settings.base_url, headers={"X-API-Key": ALICE}) as alice,
        httpx.AsyncClient(base_url=hub.settings.base_url, headers={"X-API-Key": BOB}) as bob,
        httpx.AsyncClient(base_url=hub.settings.base_url, headers={"X-API-Key": CAROL}) as carol,
    ):
        # Alice's key names alpha alone: alpha may not consult beta for her.
        llm.script(ToolCalls([("consult__beta", {"question": "Hi?"})]), Reply("Alone then."))
        task = await send(await hub.client("alpha", http=alice), "Ask Beta.")
        assert answer_text(task) == "Alone then."
        (refusal,) = tool_results(llm.requests[-1])
        assert refusal.startswith("Error: The caller may not consult beta:")
        assert "may not use persona 'beta'" in refusal

        # Bob may: the consultation is his task, which Carol cannot see.
        llm.script(
            ToolCalls([("consult__beta", {"question": "Hi?"})]), Reply("Hello."), Reply("Done.")
        )
        streaming = await hub.client("alpha", http=bob, streaming=True)
        events = await stream(streaming, "Ask Beta.")
        (result,) = data_parts(events, "tool-result")
        beta_task_id = result["taskId"]
        mine = await get_task(await hub.client("beta", http=bob), beta_task_id)
        assert answer_text(mine) == "Hello."
        with pytest.raises((A2AClientError, A2AError)):
            await get_task(await hub.client("beta", http=carol), beta_task_id)
