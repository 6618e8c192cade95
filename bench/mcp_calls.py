"""The MCP server's figures (issue 39): the size of the tool list each design gives a client,
and what a ``/mcp`` tool call adds over the A2A path to the same persona (target <= 2 ms).

``uv run python bench/mcp_calls.py`` runs both parts; ``--part lists`` or ``--part overhead``
one. (Not ``bench/mcp.py``: run from ``bench/``, that name would hide the ``mcp`` package.)

- ``lists``: the ``tools/list`` result, as JSON on the wire, at 10, 100 and 1,000 personas
  for each design (a tool per persona, described by its card; one ``ask_persona`` tool and
  ``list_personas``), and its tokens estimated (``tiktoken``'s ``o200k_base`` when installed,
  else 4 bytes a token). The personas are the bundled ones, copied under new ids.
- ``overhead``: the hub at its defaults (``persona-agent serve``, the bundled personas),
  the fake LLM answering at once (20 tokens); sequential calls, alternating: a blocking
  A2A ``SendMessage`` to Socrates over JSON-RPC, then the ``tools/call`` of his MCP tool
  over ``/mcp`` (one session, the 2025-11-25 handshake, the answer as an SSE response);
  each the client's time over raw HTTP. The figure is the difference of the medians (and
  of the p90s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # persona_agent, tests

from run import Row, fake_llm, hub, hub_home

TARGET_MS = 2.0
COUNTS = (10, 100, 1000)
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
PROTOCOL = "2025-11-25"


def token_counter() -> tuple[str, Any]:
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("o200k_base")
        return "o200k_base", lambda text: len(encoding.encode(text))
    except Exception:  # not installed, or its file cannot be fetched here
        return "bytes/4", lambda text: len(text.encode()) // 4


def lists() -> list[Row]:
    """The tool list's size, each design at each persona count."""
    import mcp.types as types

    from persona_agent.a2a.cards import build_agent_card
    from persona_agent.api.mcp.mcp_tools import ask_tools, persona_tool
    from persona_agent.personas.loader import load_persona_file

    bundled = [load_persona_file(path) for path in sorted((REPO / "personas").glob("*.yaml"))]
    name, count_tokens = token_counter()
    rows = []
    for count in COUNTS:
        tools = []
        for number in range(count):
            persona = bundled[number % len(bundled)]
            persona_id = f"{persona.id}-{number}"
            card = build_agent_card(persona.model_copy(update={"id": persona_id}), BASE_URL)
            tools.append(persona_tool(persona_id, card))
        for design, listed in (("a tool per persona", tools), ("ask_persona", ask_tools())):
            result = types.ListToolsResult(tools=listed)
            wire = json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True))
            rows.append(Row(f"tools/list, {design}, {count} personas", len(wire) / 1024, "KiB"))
            figure = f"tools/list, {design}, {count} personas"
            rows.append(Row(figure, count_tokens(wire), f"tokens ({name})"))
    return rows


REPO = Path(__file__).resolve().parents[1]
BASE_URL = "http://127.0.0.1:8000"


def a2a_call(http: httpx.Client, url: str, text: str) -> float:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    started = time.monotonic()
    response = http.post(url, json=body, headers={"A2A-Version": "1.0"})
    took = time.monotonic() - started
    state = response.json()["result"]["task"]["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"Socrates's task ended {state}")
    return took


def mcp_session(http: httpx.Client, url: str) -> dict[str, str]:
    """The headers of an initialized MCP session (the handshake era)."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    response = http.post(url, json=initialize, headers=MCP_HEADERS)
    response.raise_for_status()
    headers = {
        **MCP_HEADERS,
        "Mcp-Session-Id": response.headers["mcp-session-id"],
        "MCP-Protocol-Version": PROTOCOL,
    }
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    http.post(url, json=done, headers=headers).raise_for_status()
    return headers


def mcp_call(http: httpx.Client, url: str, headers: dict[str, str], text: str) -> float:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "socrates", "arguments": {"message": text}},
    }
    started = time.monotonic()
    response = http.post(url, json=body, headers=headers)
    took = time.monotonic() - started
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    result = json.loads(data[-1])["result"]
    if result.get("isError") or result["structuredContent"]["state"] != "completed":
        raise RuntimeError(f"the MCP call failed: {result}")
    return took


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def overhead(root: Path, samples: int) -> list[Row]:
    home = hub_home(root, "hub-mcp")
    a2a: list[float] = []
    via_mcp: list[float] = []
    with (
        fake_llm(0, tokens=20) as llm,
        hub(llm, home) as (url, _started),
        httpx.Client(timeout=60) as http,
    ):
        socrates, endpoint = f"{url}/a2a/socrates/", f"{url}/mcp"
        headers = mcp_session(http, endpoint)
        for number in range(20):  # warm-up
            a2a_call(http, socrates, f"Warm up {number}.")
            mcp_call(http, endpoint, headers, f"Warm up {number}.")
        for number in range(samples):
            a2a.append(a2a_call(http, socrates, f"Question {number}."))
            via_mcp.append(mcp_call(http, endpoint, headers, f"Question {number}."))
    added = (statistics.median(via_mcp) - statistics.median(a2a)) * 1000
    added_p90 = (p90(via_mcp) - p90(a2a)) * 1000
    return [
        Row("A2A SendMessage to Socrates (median)", statistics.median(a2a) * 1000, "ms"),
        Row("A2A SendMessage to Socrates (p90)", p90(a2a) * 1000, "ms"),
        Row("MCP tools/call of socrates (median)", statistics.median(via_mcp) * 1000, "ms"),
        Row("MCP tools/call of socrates (p90)", p90(via_mcp) * 1000, "ms"),
        Row("/mcp's added time (median)", added, "ms", f"<= {TARGET_MS:g} ms", added <= TARGET_MS),
        Row("/mcp's added time (p90)", added_p90, "ms"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["lists", "overhead"], action="append")
    parser.add_argument("--samples", type=int, default=500, help="calls of each path")
    args = parser.parse_args()
    parts = args.part or ["lists", "overhead"]
    rows: list[Row] = []
    if "lists" in parts:
        rows += lists()
    if "overhead" in parts:
        with tempfile.TemporaryDirectory(prefix="bench-mcp-") as root:
            rows += overhead(Path(root), args.samples)
    for row in rows:
        mark = "" if not row.target else ("  ok" if row.ok else "  MISSED")
        target = f"  (target {row.target})" if row.target else ""
        print(f"{row.figure:55} {row.value:10.2f} {row.unit}{target}{mark}")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
