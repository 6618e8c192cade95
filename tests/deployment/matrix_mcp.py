"""The matrix's MCP cells: the ``mcp`` SDK's client over streamable HTTP in either protocol
era (``auto``: 2026-07-28; ``legacy``: the initialize handshake), through the deployment's
front door (nginx before replicas), and the MCP Inspector's CLI from npm."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp.types as types
from mcp.client import Client
from mcp.client.client import ConnectMode
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.deployment.matrix import Cell
from tests.deployment.matrix_a2a import SPEAKERS
from tests.deployment.matrix_hubs import FULL_KEY, LIMITED_KEY, Deployment
from tests.deployment.matrix_sdk03 import tool_cache
from tests.fakes.fake_llm import FakeLLM

__all__ = [
    "INSPECTOR",
    "Connect",
    "inspector_command",
    "mcp_client",
    "run_inspector_cell",
    "run_mcp_cell",
]

INSPECTOR_CACHE = tool_cache() / "mcp-inspector-2.12.0"

WAIT = 60
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
"""The Inspector's npm package, pinned (its CLI: ``mcp-inspector --cli``)."""


@asynccontextmanager
async def mcp_client(deployment: Deployment, cell: Cell, key: str) -> AsyncIterator[Client]:
    """The SDK's client of the cell's door: over streamable HTTP through the deployment's
    front door (nginx before replicas), in the door's era; or over stdio, to a
    ``persona-agent mcp`` it starts on the deployment's database, as the caller ``key``."""
    era = cell.door.binding[1]
    if era == "stdio":
        async with Client(_stdio(deployment, key), cache=None) as client:
            yield client
        return
    mode: ConnectMode = "legacy" if era == "legacy" else "auto"
    url = f"{deployment.bases[0]}/mcp"
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=WAIT) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, mode=mode) as client,
    ):
        yield client


def _stdio(deployment: Deployment, key: str) -> StdioServerParameters:
    """``persona-agent mcp`` as a desktop client starts it, sharing the one hub's database
    (its tasks are the hub's), with the key as ``PERSONA_AGENT_MCP_API_KEY``."""
    data = deployment.personas_dir.parent / f"stdio-{uuid.uuid4().hex[:8]}"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PERSONA_AGENT_", "OPENAI_", "AZURE_OPENAI_"))
    }
    settings = {
        **deployment.settings,
        "DATA_DIR": str(data),
        "DATABASE_URL": deployment.database_url,
        "WATCH_PERSONAS": "false",
        "MCP_API_KEY": key,
    }
    env.update({f"PERSONA_AGENT_{name}": value for name, value in settings.items()})
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "persona_agent.cli", "mcp", "-d", str(deployment.personas_dir)],
        env=env,
        cwd=str(deployment.personas_dir.parent),
    )


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, types.TextContent))


def _assert_answer(cell: Cell, text: str) -> None:
    """The answer in the door's terms: a persona's answer; a panel's, each member's under
    their name, as A2A's final message has it."""
    for who in SPEAKERS[cell.target]:
        expected = f"Answer from {who}."
        if cell.target == "panel":
            expected = f"{who}:\n{expected}"
        assert expected in text, (cell.id, text)


async def _disconnects(llm: FakeLLM, at_least: int, at_cancel: str = "") -> None:
    """Until the model has seen ``at_least`` abandoned calls in all (20 s at most). The
    failure tells which link to suspect: model calls never made (the cancel came before
    they began), or made and answered to their end (the hub did not close them)."""
    for _ in range(400):
        if llm.disconnects >= at_least:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(
        f"{llm.disconnects} model calls abandoned, not {at_least}; {_model_calls(llm)}"
        f" ({at_cancel} when the client gave up)"
    )


def _model_calls(llm: FakeLLM) -> str:
    """The model's calls of the cell so far, for a failure's message."""
    return f"{len(llm.requests)} made, {llm.active} still answering, {llm.chunks_sent} chunks"


Connect = Callable[[str], AbstractAsyncContextManager[Client]]
"""``connect(key)``: an MCP client of the cell's door as the caller ``key``."""


async def _mcp(deployment: Deployment, cell: Cell, llm: FakeLLM, connect: Connect) -> None:
    tool = cell.persona_id
    operation = cell.operation
    if operation == "refused":
        if cell.door.binding[1] != "stdio":  # over stdio, the caller is the key it starts with
            anonymous = await _raw_tools_list(deployment.bases[0], {})
            assert anonymous.status_code == 401, anonymous.text
        async with connect(LIMITED_KEY) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert tool not in names, names
            refused = await client.call_tool(tool, {"message": "Let me in"})
            assert refused.is_error
            assert f"may not use persona '{tool}'" in text_of(refused), text_of(refused)
        return
    async with connect(FULL_KEY) as client:
        if operation == "list":
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tool in tools, sorted(tools)
            assert tools[tool].input_schema["properties"]["message"]
        elif operation in ("send", "stream"):
            heard: list[str | None] = []

            async def progress(progress: float, total: float | None, message: str | None) -> None:
                heard.append(message)

            answer = await client.call_tool(
                tool,
                {"message": "Hello, matrix"},
                progress_callback=progress if operation == "stream" else None,
            )
            assert not answer.is_error, text_of(answer)
            _assert_answer(cell, text_of(answer))
            facts = answer.structured_content or {}
            assert facts["state"] == "completed", facts
            # The tool call was a task of the hub: read over A2A from the other replica.
            task = await _get_task(deployment.there(), tool, str(facts["task_id"]))
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            if operation == "stream":
                assert heard, "no progress was heard"
        elif operation == "cancel-same":
            calls = len(SPEAKERS[cell.target])
            before = llm.disconnects
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, tool, {"message": "[slow] Talk, matrix"})
                await anyio.to_thread.run_sync(llm.wait_chunks, calls, float(WAIT))
                at_cancel = _model_calls(llm)
                group.cancel_scope.cancel()  # the client gives up on the call
            # The task is canceled, and with it every model call it had open.
            await _disconnects(llm, before + calls, at_cancel)
        elif operation == "failing":
            failed = await client.call_tool(tool, {"message": "[fail] Hello?"})
            assert failed.is_error, text_of(failed)
            said = text_of(failed)
            assert "500" in said, said
            assert "Traceback" not in said
        else:
            raise AssertionError(f"no MCP cell for {operation}")


async def _get_task(base: str, persona_id: str, task_id: str) -> Any:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        answer = await http.post(
            f"{base}/a2a/{persona_id}/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
            headers={"X-API-Key": FULL_KEY, "A2A-Version": "1.0"},
        )
    assert "result" in answer.json(), answer.text
    return answer.json()["result"]


async def _raw_tools_list(url: str, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        return await http.post(
            f"{url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream", **headers},
        )


async def run_mcp_cell(
    deployment: Deployment, cell: Cell, llm: FakeLLM, connect: Connect | None = None
) -> None:
    """Run one ``mcp`` SDK cell, bounded; ``connect``: its clients (default: a new one of
    :func:`mcp_client` for each)."""
    with anyio.fail_after(WAIT):
        await _mcp(deployment, cell, llm, connect or partial(mcp_client, deployment, cell))


def inspector_command(cache: Path = INSPECTOR_CACHE) -> list[str] | None:
    """The Inspector's CLI, installed under ``cache`` (``npm install --prefix``, once) and
    run with node; None where there is no node or npm."""
    npm = shutil.which("npm")
    node = shutil.which("node")
    if npm is None or node is None:
        return None
    package = cache / "node_modules" / "@modelcontextprotocol" / "inspector"
    cli = package / "clients" / "launcher" / "build" / "index.js"
    if not cli.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", INSPECTOR],
            check=True,
            timeout=600,
            capture_output=True,
        )
    assert cli.exists(), f"the Inspector's CLI is not at {cli}"
    return [node, str(cli), "--cli"]


def run_inspector_cell(command: list[str], deployment: Deployment, cell: Cell) -> None:
    """``mcp-inspector --cli URL --transport http --method tools/list`` (or ``tools/call``)
    with the key as a header; its JSON output judged."""
    args = [
        *command,
        f"{deployment.bases[0]}/mcp",
        "--transport",
        "http",
        "--header",
        f"X-API-Key: {FULL_KEY}",
    ]
    if cell.operation == "list":
        args += ["--method", "tools/list"]
    else:
        args += [
            "--method",
            "tools/call",
            "--tool-name",
            cell.persona_id,
            "--tool-arg",
            "message=Hello, matrix",
        ]
    done = subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=WAIT * 2,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    said: Any = json.loads(done.stdout)
    if cell.operation == "list":
        assert cell.persona_id in [tool["name"] for tool in said["tools"]], said
    else:
        assert not said.get("isError"), said
        _assert_answer(cell, "\n".join(part.get("text", "") for part in said["content"]))


if __name__ == "__main__":  # .ci/run: install the Inspector ahead of the tests
    print(inspector_command())
