"""What an answer cost: the cost-v1 data of a completed task carries ``costUsd`` from the
price file (PERSONA_AGENT_LLM_PRICES), the model server's cached prompt tokens priced
apart, every model call of a turn counted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import send
from tests.integration.conftest import Hub, HubFactory


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): one
    test calls a tool, on a hub of its own with them (``mcp_servers_file``), and each stdio
    server is a process of about 1 s of CPU."""
    return None


def _cost_data(task: Any) -> dict[str, Any]:
    data = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
    assert len(data) == 1
    assert data[0]["kind"] == "cost-v1"
    return data[0]


@pytest.fixture
def prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text("gpt-4o-mini: {input: 2.0, output: 8.0, cached_input: 0.5}\n", encoding="utf-8")
    return path


async def test_an_answer_carries_its_cost(
    hub_factory: HubFactory, llm: FakeLLM, prices: Path
) -> None:
    async with hub_factory(llm_prices=prices, llm_model="gpt-4o-mini-2024-07-18") as hub:
        llm.script(Reply("Know thyself.", usage=(1_200, 300), cached_tokens=200))
        task = await send(await hub.client("socrates"), "Advice?")
    assert llm.requests[-1]["model"] == "gpt-4o-mini-2024-07-18"  # priced by its prefix
    cost = _cost_data(task)
    assert cost["usage"] == {
        "promptTokens": 1_200,
        "completionTokens": 300,
        "totalTokens": 1_500,
        "cachedPromptTokens": 200,
    }
    assert cost["costUsd"] == pytest.approx((1_000 * 2.0 + 200 * 0.5 + 300 * 8.0) / 1e6)


async def test_every_model_call_of_a_turn_is_counted(
    hub_factory: HubFactory, llm: FakeLLM, prices: Path, mcp_servers_file: Path
) -> None:
    async with hub_factory(llm_prices=prices, mcp_config=mcp_servers_file) as hub:
        llm.script(
            ToolCalls([("local__add", {"a": 2, "b": 3})]),
            Reply("Five.", usage=(400, 10)),
        )
        task = await send(await hub.client("toolsmith"), "Add 2 and 3.")
    cost = _cost_data(task)
    assert cost["llmCalls"] == 2
    prompt = cost["usage"]["promptTokens"]
    completion = cost["usage"]["completionTokens"]
    assert prompt > 400  # the tool call's prompt as well
    assert cost["costUsd"] == pytest.approx((prompt * 2.0 + completion * 8.0) / 1e6)


async def test_without_a_price_there_is_no_cost(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory() as hub:
        llm.script(Reply("Hmm."))
        task = await send(await hub.client("socrates"), "Price?")
    assert "costUsd" not in _cost_data(task)


async def test_the_usage_report_sums_the_answers_cost_v1_data(
    hub_factory: HubFactory, llm: FakeLLM, prices: Path
) -> None:
    async with hub_factory(llm_prices=prices) as hub:
        client = await hub.client("socrates")
        llm.script(
            Reply("One.", usage=(1_000, 100), cached_tokens=300),
            Reply("Two.", usage=(2_000, 50)),
        )
        answers = [_cost_data(await send(client, text)) for text in ("First?", "Second?")]
        between = datetime.now(UTC)
        llm.script(Reply("Three.", usage=(500, 10)))
        later = _cost_data(await send(client, "Third?"))
        answers.append(later)

        everything = (await hub.http.get("/api/v1/personas/socrates/usage")).json()
        assert everything["answers"] == 3
        for key in ("promptTokens", "completionTokens"):
            assert everything[key] == sum(a["usage"][key] for a in answers)
        assert everything["cachedPromptTokens"] == 300
        assert everything["costUsd"] == pytest.approx(sum(a["costUsd"] for a in answers))
        assert everything["unpricedAnswers"] == 0
        assert [m["model"] for m in everything["byModel"]] == [answers[0]["model"]]

        window = (
            await hub.http.get(
                "/api/v1/personas/socrates/usage", params={"since": between.isoformat()}
            )
        ).json()
        assert window["answers"] == 1
        assert window["promptTokens"] == 500
        assert window["costUsd"] == pytest.approx(later["costUsd"])
        # Another persona's report holds none of them.
        other = (await hub.http.get("/api/v1/personas/ada-lovelace/usage")).json()
        assert other["answers"] == 0

        unknown = await hub.http.get("/api/v1/personas/nobody-here/usage")
        assert unknown.status_code == 404
        backwards = await hub.http.get(
            "/api/v1/personas/socrates/usage",
            params={"since": "2030-01-01T00:00:00Z", "until": "2020-01-01T00:00:00Z"},
        )
        assert backwards.status_code == 422
        assert [e["loc"] for e in backwards.json()["detail"]] == [["query", "since"]]


async def test_a_deleted_personas_usage_goes_with_it(hub_factory: HubFactory, llm: FakeLLM) -> None:
    persona = {"id": "tally", "name": "Tally", "description": "Counts things."}
    async with hub_factory() as hub:
        assert (await hub.http.post("/api/v1/personas", json=persona)).status_code == 201
        llm.script(Reply("Counted."))
        await send(await hub.client("tally"), "Count?")
        report = "/api/v1/personas/tally/usage"
        assert (await hub.http.get(report)).json()["answers"] == 1
        assert (await hub.http.delete("/api/v1/personas/tally")).status_code == 204
        assert (await hub.http.post("/api/v1/personas", json=persona)).status_code == 201
        assert (await hub.http.get(report)).json()["answers"] == 0


COUNTS = ("durationMs", "llmCalls", "toolCalls")
USAGE = ("promptTokens", "completionTokens", "totalTokens", "cachedPromptTokens")


def _cost_on_the_wire(text: str) -> dict[str, Any]:
    """The cost-v1 object of a JSON answer (1.0 or v0.3), as a JSON client reads it."""
    found: list[dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("kind") == "cost-v1":
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(text))
    assert found, text
    return found[0]


def _assert_integers(cost: dict[str, Any]) -> None:
    for fields, names in ((cost, COUNTS), (cost["usage"], USAGE)):
        for name in names:
            assert type(fields[name]) is int, (name, fields[name])


V10 = {"A2A-Version": "1.0"}
MESSAGE = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "Hi"}]}
V03_MESSAGE = {"kind": "message", "role": "user", "messageId": "m1"}


def _rpc(method: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


@pytest.mark.parametrize(
    ("path", "body", "headers"),
    [
        pytest.param("", _rpc("SendMessage", MESSAGE), V10, id="JSONRPC-1.0"),
        pytest.param(
            "",
            _rpc("message/send", {**V03_MESSAGE, "parts": [{"kind": "text", "text": "Hi"}]}),
            {},
            id="JSONRPC-0.3",
        ),
        pytest.param("message:send", {"message": MESSAGE}, V10, id="HTTP+JSON-1.0"),
        pytest.param(
            "v1/message:send",
            {"message": {"role": "ROLE_USER", "messageId": "m1", "content": [{"text": "Hi"}]}},
            {},
            id="HTTP+JSON-0.3",
        ),
    ],
)
async def test_the_counts_are_integers_on_the_wire(
    hub: Hub, llm: FakeLLM, path: str, body: dict[str, Any], headers: dict[str, str]
) -> None:
    """A protobuf Struct holds doubles only; a JSON client still reads ``1500``, not
    ``1500.0``."""
    llm.script(Reply("Hello.", usage=(1_200, 300), cached_tokens=200))
    reply = await hub.http.post(f"/a2a/socrates/{path}", json=body, headers=headers)
    assert reply.status_code == 200, reply.text
    assert int(reply.headers["content-length"]) == len(reply.content)
    cost = _cost_on_the_wire(reply.text)
    _assert_integers(cost)
    assert cost["usage"]["totalTokens"] == 1_500
    assert '"totalTokens":1500' in reply.text.replace(" ", "")


async def test_the_counts_are_integers_in_a_stream_and_a_read_task(hub: Hub, llm: FakeLLM) -> None:
    llm.script(Reply("Hello there.", usage=(700, 20), cached_tokens=100))
    events: list[str] = []
    request = _rpc("SendStreamingMessage", MESSAGE)
    async with hub.http.stream("POST", "/a2a/socrates/", json=request, headers=V10) as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(line[5:].strip())
    last = [event for event in events if "cost-v1" in event]
    assert len(last) == 1
    cost = _cost_on_the_wire(last[0])
    _assert_integers(cost)
    task_id = json.loads(last[0])["result"]["statusUpdate"]["taskId"]

    got = await hub.http.get(f"/a2a/socrates/tasks/{task_id}", headers=V10)
    _assert_integers(_cost_on_the_wire(got.text))
    assert _cost_on_the_wire(got.text) == cost
