"""Faults of the model and of tool servers: the affected task ends with a short, useful
message (never a traceback), every task is terminal, and the hub keeps serving."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import Task, TaskState

from tests.conformance.conftest import TERMINAL_STATES
from tests.fakes.fake_llm import Fail, FakeLLM, Hang, Reply, ToolCalls
from tests.integration.a2a_helpers import answer_text, get_task, send, status_text, stream
from tests.integration.conftest import HubFactory
from tests.servers.mcp_servers import stdio_server_config

FAST_RETRY = {"retry-after-ms": "10"}  # the OpenAI client honours it: no backoff to wait out
SHORT = 2
"""Seconds of the model's and the tools' timeouts where a test waits one out: a hanging call
ends in them, and an ordinary one fits in them on a busy machine."""


def assert_failed_cleanly(task: Task, *expected: str) -> None:
    assert task.status.state == TaskState.TASK_STATE_FAILED
    reason = status_text(task)
    for text in expected:
        assert text in reason, reason
    assert "Traceback" not in reason
    assert 'File "' not in reason
    assert len(reason) < 400


async def assert_still_serving(client: Client, llm: FakeLLM) -> None:
    llm.script(Reply("Still here."))
    task = await send(client, "Are you still there?")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "Still here."


def tool_results(llm: FakeLLM, request: int = -1) -> list[str]:
    return [str(m["content"]) for m in llm.requests[request]["messages"] if m["role"] == "tool"]


async def test_a_model_that_times_out_fails_the_task(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(mcp_config=None, llm_timeout=SHORT) as hub:
        client = await hub.client("socrates")
        llm.script(Hang())
        async with asyncio.timeout(60):
            task = await send(client, "Hello?")
        assert_failed_cleanly(task, f"did not answer within {SHORT:g}s")
        await asyncio.to_thread(llm.wait_disconnect)
        await assert_still_serving(client, llm)


async def test_429_is_retried_honouring_retry_after_then_succeeds(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(mcp_config=None, llm_max_retries=2) as hub:
        client = await hub.client("ada-lovelace")
        llm.script(Fail(429, "slow down", {"Retry-After": "1"}), Reply("Patience rewarded."))
        task = await send(client, "Compute something.")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(task) == "Patience rewarded."
        assert len(llm.requests) == 2
        # The fake answers a retry that comes before the second it asked for with another
        # 429 and counts it: none came.
        assert llm.too_early == 0


async def test_429_and_5xx_past_the_retries_fail_the_task(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(mcp_config=None, llm_max_retries=2) as hub:
        client = await hub.client("ada-lovelace")
        llm.script(*[Fail(429, "rate limited", FAST_RETRY)] * 3)
        assert_failed_cleanly(await send(client, "Once."), "429", "rate limited")
        assert len(llm.requests) == 3  # the first try and two retries

        llm.script(Fail(502, "bad gateway", FAST_RETRY), Reply("Recovered."))
        recovered = await send(client, "Twice.")
        assert answer_text(recovered) == "Recovered."

        llm.script(*[Fail(503, "overloaded", FAST_RETRY)] * 3)
        # The status, not the server's own words (they may hold its secrets: in the log).
        failed = await send(client, "Thrice.")
        assert_failed_cleanly(failed, "503", "reference")
        assert "overloaded" not in status_text(failed)
        await assert_still_serving(client, llm)


async def test_a_stream_broken_midway_fails_the_task(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(mcp_config=None) as hub:
        client = await hub.client("charles-darwin", streaming=True)
        llm.script(Reply("One two three four five six.", break_after=2))
        events = await stream(client, "Tell me everything.")
        chunks = [
            p.text
            for e in events
            if e.HasField("artifact_update")
            for p in e.artifact_update.artifact.parts
        ]
        assert "".join(chunks) == "One two"  # what was streamed before the break
        final = events[-1].status_update.status
        assert final.state == TaskState.TASK_STATE_FAILED
        reason = "".join(p.text for p in final.message.parts)
        assert "broke off" in reason
        assert "Traceback" not in reason
        await assert_still_serving(await hub.client("charles-darwin"), llm)


async def test_malformed_tool_calls_go_back_to_the_model(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        client = await hub.client("socrates")  # every tool is allowed
        llm.script(
            ToolCalls([("nowhere__nothing", {"x": 1}), ("local__add", "{not json"), ("", "{}")]),
            Reply("I shall answer without tools."),
        )
        task = await send(client, "Use your tools.")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(task) == "I shall answer without tools."
        unknown, bad_json, nameless = tool_results(llm)
        assert "nowhere__nothing" in unknown
        assert unknown.startswith("Error")
        assert "not valid JSON" in bad_json
        assert nameless.startswith("Error")


async def test_a_tool_call_past_the_tool_timeout_gives_the_model_an_error(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(tool_timeout=SHORT) as hub:
        client = await hub.client("tinkerer")
        llm.script(ToolCalls([("local__sleep", {"seconds": 600})]), Reply("The tool was too slow."))
        async with asyncio.timeout(60):
            task = await send(client, "Sleep for a while.")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(task) == "The tool was too slow."
        assert "timed out" in tool_results(llm)[0]

        llm.script(ToolCalls([("local__add", {"a": 20, "b": 22})]), Reply("Forty-two."))
        again = await send(client, "Add, quickly.")
        assert again.status.state == TaskState.TASK_STATE_COMPLETED
        assert tool_results(llm) == ["42"]


async def test_a_tool_server_that_crashes_mid_call_is_restarted_for_the_next_call(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        client = await hub.client("tinkerer")
        llm.script(
            ToolCalls([("local__pid", {})]),
            ToolCalls([("local__crash", {})]),
            Reply("It fell over."),
        )
        crashed = await send(client, "Crash your tool server.")
        assert crashed.status.state == TaskState.TASK_STATE_COMPLETED
        pid_before = int(tool_results(llm, 1)[0])
        assert tool_results(llm, 2)[1].startswith("Error")  # the crash, reported to the model

        llm.script(ToolCalls([("local__pid", {})]), Reply("Back again."))
        after = await send(client, "Which process are you now?")
        assert after.status.state == TaskState.TASK_STATE_COMPLETED
        pid_after = int(tool_results(llm)[-1])
        assert pid_after != pid_before


async def test_a_tool_server_missing_at_start_up_leaves_the_rest_working(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = tmp_path / "mcp-missing.json"
    servers = {
        "ghost": {"command": str(tmp_path / "no-such-program")},
        "local": stdio_server_config("local"),
    }
    config.write_text(json.dumps({"servers": servers}), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        async with hub_factory(mcp_config=config) as hub:
            assert any("ghost" in record.getMessage() for record in caplog.records)
            llm.script(Reply("No tools needed."))
            plain = await send(await hub.client("marie-curie"), "Hello.")
            assert plain.status.state == TaskState.TASK_STATE_COMPLETED

            llm.script(ToolCalls([("local__add", {"a": 1, "b": 2})]), Reply("Three."))
            tooled = await send(await hub.client("toolsmith"), "1 + 2?")
            assert tooled.status.state == TaskState.TASK_STATE_COMPLETED
            assert tool_results(llm) == ["3"]
            offered = {t["function"]["name"] for t in llm.requests[-2]["tools"]}
            assert not any(name.startswith("ghost__") for name in offered)


async def test_every_task_of_a_faulty_session_is_terminal(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(mcp_config=None, llm_timeout=SHORT) as hub:
        client = await hub.client("albert-einstein")
        llm.script(
            Fail(500),
            Hang(),
            Reply("a b c d", break_after=1),
            Fail(400, "bad request"),
            Reply("ok"),
        )
        tasks = [await send(client, f"Fault {i}") for i in range(5)]
        assert [t.status.state for t in tasks] == [TaskState.TASK_STATE_FAILED] * 4 + [
            TaskState.TASK_STATE_COMPLETED
        ]
        for task in tasks[:4]:
            assert_failed_cleanly(task)
            assert (await get_task(client, task.id)).status.state in TERMINAL_STATES
