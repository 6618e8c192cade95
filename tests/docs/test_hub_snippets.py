"""The blocks about what a running hub exposes to operators, checked against one: a hub
on a real uvicorn (tests/integration/conftest.py) with API keys, an audit log, the price
file docs/configuration.md shows and the tests' MCP servers, after it answered a message
with a tool call; and the MCP servers docs/tools.md has a reader try.

- the Prometheus configuration scrapes the hub's ``/metrics`` as Prometheus would (its
  ``authorization``, ``metrics_path`` and targets), the key it leaves to the reader a key
  with ``personas:read``;
- each query of the Grafana block names metrics the hub exposes, by labels they carry;
- the audit line is the line the hub writes for the same write;
- the MCP test server runs over both transports as the docs start it, and the servers
  file beside it is what the hub's toolbox connects to."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from persona_agent.tools.config import load_mcp_config
from persona_agent.tools.toolbox import MCPToolbox
from tests.docs.sandbox import Sandbox, free_port, rewrite
from tests.docs.snippets import claim, commands, find, words
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.conftest import Hub, HubFactory

PROMETHEUS = claim("docs/observability.md", "scrape_configs:")
QUERIES = claim("docs/observability.md", "histogram_quantile(0.95")
AUDIT_LINE = claim("docs/security.md", '"action": "persona.create"')
TRY_SERVERS = claim("docs/tools.md", "python tests/servers/mcp_tools_server.py stdio")
TRY_CONFIG = claim(
    "docs/tools.md", "local: {command: python, args: [tests/servers/mcp_tools_server.py, stdio]}"
)
PRICES = find("docs/configuration.md", "gpt-4o-mini: {input: 0.15")

ALICE = "a-long-random-key-for-alice"
SCRAPER = "a-key-for-prometheus-0123456789"
KEYS = [
    {"name": "alice", "key": ALICE},
    {"name": "prometheus", "key": SCRAPER, "scopes": ["personas:read"]},
]


@pytest.fixture
async def hub(hub_factory: HubFactory, tmp_path: Path) -> AsyncIterator[Hub]:
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES.text, encoding="utf-8")
    async with hub_factory(
        api_keys=json.dumps(KEYS), audit_log=str(tmp_path / "audit.jsonl"), llm_prices=prices
    ) as running:
        yield running


async def _answer_with_a_tool_call(hub: Hub, llm: FakeLLM) -> None:
    llm.script(ToolCalls([("local__add", {"a": 2, "b": 3})]), Reply("Five.", usage=(40, 2)))
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "2+3?"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = await hub.http.post("/a2a/toolsmith/", json=body, headers={"A2A-Version": "1.0"})
    assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_prometheus_scrapes_the_hub_with_its_key(hub: Hub) -> None:
    (job,) = yaml.safe_load(PROMETHEUS.text)["scrape_configs"]
    authorization = job["authorization"]
    assert authorization["credentials"] == "<a key with personas:read>"
    (targets,) = job["static_configs"]
    assert all(target.endswith(":8000") for target in targets["targets"])  # the hub's port
    path = job.get("metrics_path", "/metrics")  # Prometheus's default
    credentials = f"{authorization['type']} {SCRAPER}"
    scraped = await hub.http.get(path, headers={"Authorization": credentials})
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    assert "persona_agent_info{" in scraped.text
    assert (await hub.http.get(path)).status_code == 401  # hence the key


async def test_each_query_names_metrics_and_labels_the_hub_exposes(hub: Hub, llm: FakeLLM) -> None:
    await _answer_with_a_tool_call(hub, llm)
    scraped = await hub.http.get("/metrics", headers={"Authorization": f"Bearer {SCRAPER}"})
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    queries = [
        line for line in QUERIES.text.splitlines() if line.strip() and not line.startswith("#")
    ]
    assert len(queries) >= 6
    for query in queries:
        metrics = re.findall(r"persona_agent_\w+", query)
        for metric in metrics:
            assert metric in labels, f"{query}: the hub exposes no {metric}"
        used = {
            label.strip()
            for group in re.findall(r"by \(([^)]*)\)", query)
            for label in group.split(",")
        } | set(re.findall(r"(\w+)!?=\"", query))
        carried = set().union(*(labels[m] for m in metrics))
        assert used <= carried, f"{query}: {sorted(used - carried)} not among {sorted(carried)}"


async def test_the_audit_line_is_the_one_the_hub_writes(
    hub_factory: HubFactory, tmp_path: Path
) -> None:
    shown = json.loads(AUDIT_LINE.text)
    audit = tmp_path / "audit-only.jsonl"
    persona = {"id": shown["persona"], "name": "Hal", "description": "A persona to audit."}
    async with hub_factory(api_keys=json.dumps(KEYS), audit_log=str(audit), mcp_config=None) as hub:
        created = await hub.http.post(
            "/api/v1/personas",
            json=persona,
            headers={"X-API-Key": ALICE, "X-Request-Id": shown["requestId"]},
        )
        assert created.status_code == 201, created.text
    (line,) = [json.loads(text) for text in audit.read_text().splitlines()]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])
    assert {**line, "time": shown["time"]} == shown


async def test_the_test_mcp_server_runs_over_both_transports_as_configured(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The stdio command is the servers file's ``local`` (the toolbox starts it), the HTTP
    one runs on a free port instead of 9000, in the servers file too."""
    stdio, http = commands(TRY_SERVERS)
    port = str(free_port())
    config_file = tmp_path / "mcp.yaml"
    config_file.write_text(rewrite(TRY_CONFIG.text, {"9000": port}), encoding="utf-8")
    config = load_mcp_config(config_file, {})
    local = config.servers["local"]
    assert words(stdio) == [local.command, *local.args]
    monkeypatch.chdir(sandbox.root)  # the clone the docs' relative path is in
    monkeypatch.setenv("PATH", sandbox.env["PATH"])  # `python`: the project's
    started = rewrite(http, {"9000": port})
    with sandbox.serving(started, port=int(port), ready="/mcp"):
        async with asyncio.timeout(60), MCPToolbox(config) as toolbox:
            assert toolbox.servers == {"local": "running", "remote": "running"}
            names = {tool.name for tool in toolbox.tools()}
            assert {"local__add", "remote__add"} <= names
            assert await toolbox.call("remote__add", {"a": 2, "b": 3}) == "5"
            assert await toolbox.call("local__echo", {"text": "hi"}) == "hi"
