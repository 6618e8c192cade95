"""``/metrics``: a scripted workload through real A2A clients, then one scrape parsed with
Prometheus' own text parser, every count and sum checked exactly."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.fake_llm import Fail, FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import send, stream
from tests.integration.conftest import BUNDLED, Hub, HubFactory

MODEL = "gpt-4o-mini"
KEY = "metrics-key-0123456789abcdef"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): two
    tests count tool calls, on hubs with them (``mcp_servers_file``), and each stdio server
    is a process of about 1 s of CPU."""
    return None


async def scrape(hub: Hub, **headers: str) -> Samples:
    """Every sample of ``/metrics``, by name and labels (sorted)."""
    response = await hub.http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every sample of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


def cost_data(task: Any) -> dict[str, Any]:
    parts = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
    return parts[0]


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(f"{MODEL}: {{input: 2.0, output: 8.0}}\n", encoding="utf-8")
    return path


async def test_a_scripted_workload_is_counted_exactly(
    hub_factory: HubFactory, llm: FakeLLM, prices: Path, mcp_servers_file: Path
) -> None:
    tools = {"mcp_config": mcp_servers_file}
    async with hub_factory(llm_prices=prices, llm_model=MODEL, **tools) as hub:
        socrates = await hub.client("socrates")
        streaming = await hub.client("socrates", streaming=True)
        toolsmith = await hub.client("toolsmith", ("HTTP+JSON", "1.0"))
        llm.script(
            Reply("One.", usage=(100, 20)),
            Reply("Two.", usage=(300, 40)),
            Reply("Three words here.", usage=(50, 10)),
            ToolCalls([("local__add", {"a": 2, "b": 3})]),
            Reply("Five.", usage=(70, 5)),
            Fail(400, "bad request"),
        )
        done = [await send(socrates, "First?"), await send(socrates, "Second?")]
        events = await stream(streaming, "Third?")
        done.append(await _task(socrates, events))
        done.append(await send(toolsmith, "Add 2 and 3."))
        failed = await send(socrates, "Fail, please.")
        assert failed.status.state == TaskState.TASK_STATE_FAILED
        with pytest.raises(Exception):  # noqa: B017, PT011  (whichever the client raises)
            await socrates.get_task(GetTaskRequest(id="no-such-task"))
        usage_report = (await hub.http.get("/api/v1/personas/socrates/usage")).json()
        samples = await scrape(hub)

    requests = "persona_agent_a2a_requests_total"
    # Three sends on socrates (a failed task is still a call answered), one stream, one
    # send on toolsmith over HTTP+JSON, and a GetTask of a task that does not exist.
    assert value(samples, requests, persona="socrates", method="SendMessage",
                 binding="jsonrpc", outcome="ok") == 3  # fmt: skip
    assert value(samples, requests, persona="socrates", method="SendStreamingMessage",
                 binding="jsonrpc", outcome="ok") == 1  # fmt: skip
    assert value(samples, requests, persona="toolsmith", method="SendMessage",
                 binding="http+json", outcome="ok") == 1  # fmt: skip
    assert value(samples, requests, persona="socrates", method="GetTask",
                 binding="jsonrpc", outcome="TaskNotFoundError") == 1  # fmt: skip
    assert value(samples, "persona_agent_open_streams", persona="socrates") == 0

    tasks = "persona_agent_tasks_total"
    assert value(samples, tasks, persona="socrates", state="completed") == 3
    assert value(samples, tasks, persona="socrates", state="failed") == 1
    assert value(samples, tasks, persona="toolsmith", state="completed") == 1
    assert value(samples, "persona_agent_tasks_running", persona="socrates") == 0
    duration = "persona_agent_task_duration_seconds_count"
    assert value(samples, duration, persona="socrates", state="completed") == 3
    first_text = "persona_agent_time_to_first_text_seconds_count"
    assert value(samples, first_text, persona="socrates") == 3  # the failed one had none
    assert value(samples, first_text, persona="toolsmith") == 1

    # Tokens: exactly what the answers' cost-v1 data report, and so the cost.
    answered = [cost_data(task) for task in done]
    prompt = sum(int(c["usage"]["promptTokens"]) for c in answered)
    completion = sum(int(c["usage"]["completionTokens"]) for c in answered)
    assert prompt >= 100 + 300 + 50 + 70
    tokens = "persona_agent_llm_tokens_total"
    assert value(samples, tokens, model=MODEL, kind="input") == prompt
    assert value(samples, tokens, model=MODEL, kind="output") == completion
    calls = "persona_agent_llm_calls_total"
    assert value(samples, calls, model=MODEL, outcome="ok") == 5
    assert value(samples, calls, model=MODEL, outcome="error") == 1
    cost = "persona_agent_cost_usd_total"
    assert total(samples, cost) == pytest.approx((prompt * 2.0 + completion * 8.0) / 1e6)
    assert value(samples, cost, persona="socrates", model=MODEL) == pytest.approx(
        usage_report["costUsd"]
    )
    assert usage_report["costUsd"] == pytest.approx(
        sum(c["costUsd"] for c in answered[:3])  # socrates' answers
    )

    mcp = "persona_agent_mcp_calls_total"
    assert value(samples, mcp, server="local", tool="add", outcome="ok") == 1
    assert total(samples, mcp) == 1

    personas = len(list(BUNDLED.glob("*.yaml"))) + 2  # the tests' toolsmith and hermit
    assert value(samples, "persona_agent_personas") == personas
    assert value(samples, "persona_agent_db_commit_seconds_count") >= 1
    assert value(samples, "persona_agent_info", version=_version(samples), replica="") == 1


async def _task(client: Any, events: list[Any]) -> Any:
    """The finished task a stream reported, as GetTask gives it."""
    task_id = events[-1].status_update.task_id
    return await client.get_task(GetTaskRequest(id=task_id))


def _version(samples: Samples) -> str:
    (labels,) = [dict(ls) for n, ls in samples if n == "persona_agent_info"]
    return labels["version"]


async def test_a_failing_tool_is_counted_as_such(
    hub_factory: HubFactory, llm: FakeLLM, mcp_servers_file: Path
) -> None:
    async with hub_factory(mcp_config=mcp_servers_file) as hub:
        llm.script(ToolCalls([("remote__fail", {"message": "no"})]), Reply("It failed."))
        await send(await hub.client("toolsmith"), "Try the failing tool.")
        samples = await scrape(hub)
    mcp = "persona_agent_mcp_calls_total"
    assert value(samples, mcp, server="remote", tool="fail", outcome="tool_error") == 1


async def test_metrics_need_the_read_scope_when_keys_are_set(hub_factory: HubFactory) -> None:
    async with hub_factory(api_keys=KEY) as hub:
        assert (await hub.http.get("/metrics")).status_code == 401
        samples = await scrape(hub, **{"X-API-Key": KEY})
    assert value(samples, "persona_agent_personas") > 0


async def test_a_refused_caller_is_counted(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(api_keys=KEY, a2a_access="authenticated") as hub:
        response = await hub.http.post(
            "/a2a/socrates/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}
        )
        assert response.status_code == 401
        samples = await scrape(hub, **{"X-API-Key": KEY})
    refusals = "persona_agent_a2a_refusals_total"
    assert value(samples, refusals, persona="socrates", reason="unauthenticated") == 1


async def test_metrics_can_be_turned_off(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(metrics=False) as hub:
        llm.script(Reply("Still answers."))
        task = await send(await hub.client("socrates"), "Hello?")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        response = await hub.http.get("/metrics")
    assert response.status_code == 404
    assert "PERSONA_AGENT_METRICS" in response.json()["detail"]


async def test_open_streams_are_counted_while_open(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory() as hub:
        llm.script(Reply("Slowly, word by word.", hold_after=1))  # open until released
        client = await hub.client("socrates", streaming=True)
        streaming = asyncio.create_task(stream(client, "Slowly?"))
        try:
            async with asyncio.timeout(60):
                while True:
                    samples = await scrape(hub)
                    running = value(samples, "persona_agent_tasks_running", persona="socrates")
                    if running == 1:
                        break
                    await asyncio.sleep(0.05)
            assert value(samples, "persona_agent_open_streams", persona="socrates") == 1
        finally:
            llm.release()
            await streaming
        samples = await scrape(hub)
    assert value(samples, "persona_agent_open_streams", persona="socrates") == 0
    assert value(samples, "persona_agent_tasks_running", persona="socrates") == 0
