"""One budget per request for its whole tree of calls: the model calls and tool calls of a
request, its consultations and a panel's members included, are bounded; the tree counts
once against the caller's limits; and the cost the client sees adds up every call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests.fakes.fake_llm import FINAL_WITHOUT_TOOLS, FakeLLM, Hang, Reply, ToolCalls
from tests.integration import persona_yaml
from tests.integration.a2a_helpers import get_task, send, status_text, submit
from tests.integration.conftest import Hub, HubFactory
from tests.integration.persona_yaml import write

ALPHA, BETA, GAMMA = "You are Alpha.", "You are Beta.", "You are Gamma."


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): two
    tests call a tool, on hubs with them (``mcp_servers_file``), and each stdio server is a
    process of about 1 s of CPU."""
    return None


def persona(name: str, **extra: Any) -> dict[str, Any]:
    return persona_yaml.persona(name, "budgets", **extra)


def cost_of(task: Task) -> dict[str, Any]:
    for part in task.status.message.parts:
        if part.HasField("data"):
            data: dict[str, Any] = MessageToDict(part.data)
            if data["kind"] == "cost-v1":
                return data
    raise AssertionError(f"no cost-v1 part in {task.status.message}")


def data_of(task: Task, kind: str) -> dict[str, Any]:
    for part in task.status.message.parts:
        if part.HasField("data"):
            data: dict[str, Any] = MessageToDict(part.data)
            if data["kind"] == kind:
                return data
    raise AssertionError(f"no {kind} part in {task.status.message}")


def tool_results(llm: FakeLLM) -> list[str]:
    return [str(m["content"]) for r in llm.requests for m in r["messages"] if m["role"] == "tool"]


def requests_of(llm: FakeLLM, system_text: str) -> list[dict[str, Any]]:
    return [
        r
        for r in llm.requests
        if any(m["role"] == "system" and system_text in m["content"] for m in r["messages"])
    ]


async def usage_of(hub: Hub, persona_id: str) -> dict[str, Any]:
    """What the persona's own answers used (the REST report of its usage log)."""
    response = await hub.http.get(f"/api/v1/personas/{persona_id}/usage")
    response.raise_for_status()
    found: dict[str, Any] = response.json()
    return found


def consult_everyone(*targets: str) -> ToolCalls:
    return ToolCalls([(f"consult__{t}", {"question": f"What does {t} say?"}) for t in targets])


async def test_a_model_that_consults_everyone_on_every_turn_stops_at_the_budget(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    write(personas_dir, "alpha", persona("Alpha", consult=["beta", "gamma"]))
    write(personas_dir, "beta", persona("Beta", consult=["alpha", "gamma"]))
    write(personas_dir, "gamma", persona("Gamma", consult=["alpha", "beta"]))
    # Every model call asks every persona it may (without a budget: 100 model calls with
    # three tool rounds a turn; 2,431 with the default ten).
    llm.script_for(ALPHA, *[consult_everyone("beta", "gamma")] * 200)
    llm.script_for(BETA, *[consult_everyone("alpha", "gamma")] * 200)
    llm.script_for(GAMMA, *[consult_everyone("alpha", "beta")] * 200)
    async with hub_factory(
        request_budget_model_calls=20, request_budget_tool_calls=1000, max_tool_iterations=3
    ) as hub:
        async with asyncio.timeout(60):
            task = await send(await hub.client("alpha"), "Ask everyone, again and again.")

    made = len(llm.requests)
    assert made <= 20
    # The asking persona still answers: its last call, kept for it, was made without tools.
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(task) == FINAL_WITHOUT_TOOLS
    assert requests_of(llm, ALPHA)[-1]["tool_choice"] == "none"
    refusals = [r for r in tool_results(llm) if "budget" in r]
    assert refusals, "no consultation was refused"
    assert all(
        r.startswith("Error: The budget of 20 model calls for this request is spent: ")
        for r in refusals
    ), refusals
    # Its cost-v1 counts every call of the tree: the fake LLM's count exactly.
    cost = cost_of(task)
    assert cost["llmCalls"] == made


async def test_a_tool_call_past_the_budget_is_refused_and_the_turn_ends_with_an_answer(
    hub_factory: HubFactory, llm: FakeLLM, mcp_servers_file: Path
) -> None:
    echo: list[tuple[str, dict[str, Any] | str]] = [
        ("local__echo", {"text": f"call {i}"}) for i in range(5)
    ]
    llm.script(ToolCalls(echo), Reply("Done with three."))
    async with hub_factory(request_budget_tool_calls=3, mcp_config=mcp_servers_file) as hub:
        task = await send(await hub.client("toolsmith"), "Echo five times.")

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    results = tool_results(llm)
    assert results[:3] == ["call 0", "call 1", "call 2"]
    assert (
        results[3:]
        == [
            "Error: The budget of 3 tool calls for this request is spent: answer with what you have"
        ]
        * 2
    )
    # No tool call is left: the next call is the turn's last, without tools.
    assert llm.requests[-1]["tool_choice"] == "none"
    assert cost_of(task)["toolCalls"] == 3


async def test_a_persona_lowers_the_budget_of_its_requests_and_never_raises_it(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM, mcp_servers_file: Path
) -> None:
    high = {"model_calls_per_request": 1000, "tool_calls_per_request": 1000}
    write(personas_dir, "alpha", persona("Alpha", consult=["beta"], limits=high))
    write(personas_dir, "beta", persona("Beta", limits=high))
    lean = persona("Lean", tools={"allow": ["local__echo"]}, limits={"tool_calls_per_request": 1})
    write(personas_dir, "lean", lean)
    llm.script_for(ALPHA, *[consult_everyone("beta")] * 10)
    async with hub_factory(request_budget_model_calls=4, mcp_config=mcp_servers_file) as hub:
        task = await send(await hub.client("alpha"), "Ask Beta, again and again.")
        # The hub's 4: Alpha's first call, Beta's answer, Alpha's second call (its second
        # consultation refused), and Alpha's last, kept for it.
        assert [len(requests_of(llm, ALPHA)), len(requests_of(llm, BETA))] == [3, 1]
        assert cost_of(task)["llmCalls"] == 4
        assert (
            "Error: The budget of 4 model calls for this request is spent: "
            "answer without consulting beta"
        ) in tool_results(llm)

        llm.reset()
        echo: list[tuple[str, dict[str, Any] | str]] = [
            ("local__echo", {"text": "one"}),
            ("local__echo", {"text": "two"}),
        ]
        llm.script(ToolCalls(echo), Reply("Lean answers."))
        answered = await send(await hub.client("lean"), "Echo twice.")
    assert status_text(answered) == "Lean answers."
    assert tool_results(llm) == [
        "one",
        "Error: The budget of 1 tool calls for this request is spent: answer with what you have",
    ]


async def test_a_consulted_persona_bounds_its_own_part_by_its_limit(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    write(personas_dir, "alpha", persona("Alpha", consult=["beta"]))
    limits = {"model_calls_per_request": 2}
    write(personas_dir, "beta", persona("Beta", consult=["gamma"], limits=limits))
    write(personas_dir, "gamma", persona("Gamma"))
    llm.script_for(ALPHA, consult_everyone("beta"), Reply("Alpha heard Beta."))
    llm.script_for(BETA, *[consult_everyone("gamma")] * 5)
    async with hub_factory() as hub:
        task = await send(await hub.client("alpha"), "Ask Beta.")

    assert status_text(task) == "Alpha heard Beta."
    # Beta's part: its first call (which asked Gamma: refused) and its last, without tools.
    beta = requests_of(llm, BETA)
    assert len(beta) == 2
    assert beta[-1]["tool_choice"] == "none"
    assert requests_of(llm, GAMMA) == []
    assert (
        "Error: The budget of 2 model calls for this request is spent: "
        "answer without consulting gamma"
    ) in tool_results(llm)


async def test_a_moderated_panel_of_many_rounds_stops_at_its_budget_and_says_why(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    # 2 members x 10 rounds: 20 picks, 20 turns and a synthesis (41 calls) without a budget.
    panel = {
        "name": "Long Forum",
        "description": "A test panel that would talk for long.",
        "panel": {
            "mode": "moderated",
            "moderator": "socrates",
            "members": ["socrates", "ada-lovelace"],
            "rounds": 10,
        },
    }
    write(personas_dir, "long-forum", panel)
    async with hub_factory(request_budget_model_calls=9) as hub, asyncio.timeout(60):
        task = await send(await hub.client("long-forum"), "What is a machine?")

    # 9 calls: 4 picks and 4 turns, then the synthesis, for which one was kept.
    assert len(llm.requests) == 9
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    reason = (
        "The budget of 9 model calls for this request is spent: the panel stopped after 4 turns"
    )
    assert status_text(task).endswith(f"({reason}.)")
    panel_data = data_of(task, "panel")
    assert panel_data["halted"] == reason
    assert len(panel_data["turns"]) == 4
    assert panel_data["synthesis"]["state"] == "completed"
    assert cost_of(task)["llmCalls"] == 9


async def test_a_consultation_succeeds_with_one_running_task_per_caller(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    write(personas_dir, "alpha", persona("Alpha", consult=["beta"]))
    write(personas_dir, "beta", persona("Beta"))
    llm.script(consult_everyone("beta"), Hang())
    async with hub_factory(max_running_tasks=2) as hub:
        alpha = await hub.client("alpha")
        asking = await submit(alpha, "Ask Beta something slow.")
        await asyncio.to_thread(llm.wait_requests, 2)  # Beta is answering, for the caller
        # The consultation is part of the request that asked for it: the caller runs one
        # task, and may start another.
        llm.script(Reply("Another answer."))
        async with asyncio.timeout(60):
            other = await send(await hub.client("hermit"), "Meanwhile, hello.")
        assert other.status.state == TaskState.TASK_STATE_COMPLETED
        assert (await get_task(alpha, asking)).status.state == TaskState.TASK_STATE_WORKING

    llm.reset()
    llm.script(consult_everyone("beta"), Reply("Beta answers."), Reply("Alpha heard Beta."))
    async with hub_factory(max_running_tasks=1) as hub:
        task = await send(await hub.client("alpha"), "Ask Beta.")
    assert status_text(task) == "Alpha heard Beta."
    assert tool_results(llm) == ["Beta answers."]


async def test_a_consulting_answer_costs_its_own_calls_and_its_consultations(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    write(personas_dir, "alpha", persona("Alpha", consult=["beta"]))
    write(personas_dir, "beta", persona("Beta"))
    llm.script_for(ALPHA, consult_everyone("beta"), Reply("Alpha heard Beta.", usage=(30, 4)))
    llm.script_for(BETA, Reply("Beta answers.", usage=(20, 2)))
    async with hub_factory() as hub:
        task = await send(await hub.client("alpha"), "Ask Beta.")
        alpha, beta = await usage_of(hub, "alpha"), await usage_of(hub, "beta")
        beta_task = await get_task(await hub.client("beta"), await only_task(hub, "beta"))

    assert beta["promptTokens"] == 20
    cost = cost_of(task)
    assert cost["usage"]["promptTokens"] == alpha["promptTokens"] + beta["promptTokens"]
    assert cost["usage"]["completionTokens"] == (
        alpha["completionTokens"] + beta["completionTokens"]
    )
    assert (cost["llmCalls"], cost["toolCalls"]) == (3, 1)
    # The consultation's own task reports its part alone.
    beta_cost = cost_of(beta_task)
    assert beta_cost["usage"] == {"promptTokens": 20, "completionTokens": 2, "totalTokens": 22}
    assert (beta_cost["llmCalls"], beta_cost["toolCalls"]) == (1, 0)


async def only_task(hub: Hub, persona_id: str) -> str:
    listed = await hub.http.get(f"/a2a/{persona_id}/tasks")
    (found,) = listed.json()["tasks"]
    return str(found["id"])


async def test_a_panels_cost_includes_its_members_consultations(
    personas_dir: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    write(personas_dir, "alpha", persona("Alpha", consult=["beta"]))
    write(personas_dir, "beta", persona("Beta"))
    panel = {
        "name": "Small Panel",
        "description": "A panel whose member consults.",
        "panel": {"mode": "broadcast", "members": ["alpha", "gamma"]},
    }
    write(personas_dir, "gamma", persona("Gamma"))
    write(personas_dir, "small-panel", panel)
    llm.script_for(ALPHA, consult_everyone("beta"), Reply("Alpha heard Beta.", usage=(30, 4)))
    llm.script_for(BETA, Reply("Beta answers.", usage=(20, 2)))
    llm.script_for(GAMMA, Reply("Gamma alone.", usage=(10, 1)))
    async with hub_factory() as hub, asyncio.timeout(30):
        task = await send(await hub.client("small-panel"), "What do you say?")
        used = [await usage_of(hub, p) for p in ("alpha", "beta", "gamma")]

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    cost = cost_of(task)
    assert cost["usage"]["promptTokens"] == sum(u["promptTokens"] for u in used)
    assert cost["usage"]["completionTokens"] == sum(u["completionTokens"] for u in used)
    assert (cost["llmCalls"], cost["toolCalls"]) == (4, 1)
