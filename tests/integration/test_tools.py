"""MCP tools through the whole hub: real servers over stdio and streamable HTTP."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from a2a.types.a2a_pb2 import TaskState

from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import answer_text, send, stream
from tests.integration.conftest import TOOLSMITH, TRANSPORTS, Hub, HubFactory


def tool_messages(request: dict[str, object]) -> list[dict[str, object]]:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [m for m in messages if m["role"] == "tool"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tool_round_trip_over_stdio_and_http(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script(
        ToolCalls([("local__add", {"a": 2, "b": 40}), ("remote__echo", {"text": "over http"})]),
        Reply("The sum is 42."),
    )
    client = await hub.client("toolsmith", transport)
    task = await send(client, "Add 2 and 40, and echo something.")

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "The sum is 42."
    first, second = llm.requests[-2:]
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert {"local__add", "local__echo", "local__sleep", "remote__add", "remote__echo"} <= offered
    assert "local__fail" not in offered  # not on the allow-list
    results = [str(m["content"]) for m in tool_messages(second)]
    assert results[0] == "42"
    assert "over http" in results[1]


async def test_tool_calls_are_reported_as_status_updates(hub: Hub, llm: FakeLLM) -> None:
    llm.script(ToolCalls([("local__add", {"a": 1, "b": 1})]), Reply("Two."))
    client = await hub.client("toolsmith", streaming=True)
    events = await stream(client, "1+1?")
    tool_updates = [
        e.status_update.status.message
        for e in events
        if e.HasField("status_update")
        and e.status_update.status.message.parts
        and e.status_update.status.state == TaskState.TASK_STATE_WORKING
    ]
    kinds = [
        part.data.struct_value["kind"]
        for message in tool_updates
        for part in message.parts
        if part.HasField("data")
    ]
    assert kinds == ["tool-call", "tool-result"]


async def test_iteration_cap_forces_a_final_text_answer(hub_factory, llm: FakeLLM) -> None:  # type: ignore[no-untyped-def]
    async with hub_factory(max_tool_iterations=3) as hub:
        llm.script(*[ToolCalls([("local__add", {"a": i, "b": 1})]) for i in range(10)])
        client = await hub.client("toolsmith")
        task = await send(client, "Keep adding forever.")

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(llm.requests) == 4  # 3 tool rounds, then the forced final call
    assert [r.get("tool_choice") for r in llm.requests] == ["auto", "auto", "auto", "none"]
    assert answer_text(task)


async def test_allow_list_hides_and_refuses_other_tools(hub: Hub, llm: FakeLLM) -> None:
    # The hermit may use no tool: none is offered, and a call the model makes anyway is refused.
    llm.script(ToolCalls([("local__add", {"a": 1, "b": 2})]), Reply("I will not count."))
    client = await hub.client("hermit")
    task = await send(client, "Add 1 and 2.")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "tools" not in llm.requests[0]
    assert answer_text(task) == "I will not count."
    refusal = tool_messages(llm.requests[1])[0]["content"]
    assert isinstance(refusal, str)
    assert "not allowed" in refusal


async def test_disallowed_tool_call_is_refused_at_call_time(hub: Hub, llm: FakeLLM) -> None:
    llm.script(ToolCalls([("local__fail", {"message": "boom"})]), Reply("That tool is off limits."))
    client = await hub.client("toolsmith")
    task = await send(client, "Use the fail tool.")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    result = tool_messages(llm.requests[-1])[0]["content"]
    assert isinstance(result, str)
    assert "not allowed" in result


async def test_malformed_tool_arguments_go_back_to_the_model(hub: Hub, llm: FakeLLM) -> None:
    llm.script(ToolCalls([("local__add", "{not json")]), Reply("Sorry, let me answer plainly."))
    client = await hub.client("toolsmith")
    task = await send(client, "Add things.")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    result = tool_messages(llm.requests[-1])[0]["content"]
    assert isinstance(result, str)
    assert "not valid JSON" in result


@pytest.mark.parametrize("configured", [True, False])
async def test_an_allow_list_naming_an_unknown_server_is_warned_of_at_start(
    hub_factory: HubFactory, personas_dir: Path, caplog: pytest.LogCaptureFixture, configured: bool
) -> None:
    allow = ["local__add", "serach", "weather__forecast"]  # two servers no config declares
    typo = {**TOOLSMITH, "name": "Tyler Typo", "tools": {"allow": allow}}
    (personas_dir / "typo.yaml").write_text(yaml.safe_dump(typo), encoding="utf-8")
    overrides = {} if configured else {"mcp_config": None}
    with caplog.at_level(logging.WARNING, logger="persona_agent"):
        async with hub_factory(**overrides) as hub:
            assert (await hub.http.get("/a2a/typo/.well-known/agent-card.json")).is_success
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    about = sorted(w for w in warnings if "tools.allow" in w)
    known = "configured: local, remote" if configured else "PERSONA_AGENT_MCP_CONFIG"
    for server in ["serach", "weather"]:
        named = f"Persona typo: tools.allow names the MCP server '{server}'"
        assert [w for w in about if named in w and known in w], about
    if configured:  # the test's own persona names only configured servers
        assert len(about) == 2, about
