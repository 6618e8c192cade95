"""Personas as MCP tools (``/mcp``), driven by the ``mcp`` SDK's own client over streamable
HTTP against the hub on a real uvicorn: tools listed, a persona asked (the scripted model
answers), the conversation continued, progress heard, a card read, list changes announced,
and the same doors as A2A (API keys: 401, a key for some personas only)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.client import ConnectMode
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tests.conformance.conftest import wait_until
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.conftest import Hub, HubFactory
from tests.servers.hub_process import STARTUP

ALICE_KEY = "alice-key-0123456789abcdef"
SOCRATIC_KEY = "socratic-key-0123456789abcdef"
KEYS = [
    {"name": "alice", "key": ALICE_KEY},
    {"name": "socratic", "key": SOCRATIC_KEY, "personas": ["socrates"]},
]
WAIT = 10


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs: no persona here calls a tool (each stdio
    server is a process of about 1 s of CPU)."""
    return None


@asynccontextmanager
async def mcp_client(
    hub: Hub, mode: ConnectMode = "auto", on_message: Any = None, **headers: str
) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(f"{hub.settings.base_url}/mcp", http_client=http),
            cache=None,
            mode=mode,
            message_handler=on_message,
        ) as client,
    ):
        yield client


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, types.TextContent))


async def test_a_persona_is_a_tool_that_answers_and_remembers(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(Reply("Know thyself, first of all."), Reply("As I said before."))
    heard: list[tuple[float, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, message))

    async with hub_factory() as hub, mcp_client(hub) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "socrates" in tools
        assert "science-panel" in tools
        assert "Socrates" in (tools["socrates"].description or "")
        with anyio.fail_after(WAIT):
            first = await client.call_tool(
                "socrates", {"message": "What should I learn?"}, progress_callback=progress
            )
        assert not first.is_error, text_of(first)
        assert "Know thyself, first of all." in text_of(first)
        facts = first.structured_content or {}
        conversation = facts["conversation_id"]
        assert conversation
        assert facts["state"] == "completed"
        assert heard
        assert heard[-1][1] == "Know thyself, first of all."

        with anyio.fail_after(WAIT):
            second = await client.call_tool(
                "socrates", {"message": "Say it again", "conversation_id": conversation}
            )
        assert (second.structured_content or {})["conversation_id"] == conversation
        earlier = json.dumps(llm.requests[-1]["messages"])
        assert "What should I learn?" in earlier
        assert "Know thyself, first of all." in earlier

        card = await client.read_resource("persona://socrates/card")
        content = card.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert json.loads(content.text)["name"] == "Socrates"
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        assert "persona://socrates/card" in resources
        # Counted as A2A calls of the persona, through the door they came by.
        metrics = (await hub.http.get("/metrics")).text
        counted = (
            'persona_agent_a2a_requests_total{binding="mcp",method="SendStreamingMessage",'
            'outcome="ok",persona="socrates"} 2.0'
        )
        assert counted in metrics


# auto (2026-07-28): the client closes its POST; legacy: it posts notifications/cancelled.
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_cancelled_tool_call_stops_the_persona(
    hub_factory: HubFactory, llm: FakeLLM, mode: str
) -> None:
    llm.script(Hang())
    async with hub_factory() as hub, mcp_client(hub, mode) as client:
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "socrates", {"message": "Think forever."})
                await anyio.to_thread.run_sync(llm.wait_requests, 1, WAIT)
                group.cancel_scope.cancel()  # the client gives up on the call
            # The persona's task is canceled, and with it the model's stream.
            await anyio.to_thread.run_sync(llm.wait_disconnect, WAIT)
        canceled = 'persona_agent_tasks_total{persona="socrates",state="canceled"} 1.0'

        async def counted() -> bool:  # the task's end is counted as its executor returns
            return canceled in (await hub.http.get("/metrics")).text

        await wait_until("the canceled task counted", counted)


async def test_persona_changes_reach_the_tool_list(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory() as hub, mcp_client(hub) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            created = await hub.http.post(
                "/api/v1/personas",
                json={
                    "id": "newcomer",
                    "name": "Nell the Newcomer",
                    "description": "A persona made during the test.",
                    "personal_background": "Nell was made a moment ago.",
                    "language_style": {"tone": "plain"},
                    "knowledge_domains": {"Novelty": ["beginnings"]},
                },
            )
            assert created.status_code == 201, created.text
            with anyio.fail_after(WAIT):
                async for _event in subscription:
                    break
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "newcomer" in names


async def test_a_handshake_era_client_hears_of_changes(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """A 2025-11-25 client (the initialize handshake, as desktop clients speak today): the
    same tools and answers, and the list change on its session's standalone stream."""
    llm.script(Reply("Of old, as now."))
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with (
        hub_factory() as hub,
        mcp_client(hub, mode="legacy", on_message=on_message) as client,
    ):
        assert client.protocol_version not in MODERN_PROTOCOL_VERSIONS
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed
        with anyio.fail_after(WAIT):
            answer = await client.call_tool("socrates", {"message": "Hello"})
        assert "Of old, as now." in text_of(answer)
        deleted = await hub.http.delete("/api/v1/personas/hermit")
        assert deleted.status_code == 204, deleted.text
        with anyio.fail_after(WAIT):
            await changed.wait()
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "hermit" not in names


async def test_one_ask_tool_past_the_threshold(hub_factory: HubFactory, llm: FakeLLM) -> None:
    llm.script(Reply("Radium glows."))
    async with hub_factory(mcp_persona_tools_max=2) as hub, mcp_client(hub) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["ask_persona", "list_personas"]
        listed = await client.call_tool("list_personas", {"query": "curie"})
        found = [entry["id"] for entry in json.loads(text_of(listed))]
        assert "marie-curie" in found
        assert "socrates" not in found
        with anyio.fail_after(WAIT):
            answer = await client.call_tool(
                "ask_persona", {"persona": "marie-curie", "message": "What glows?"}
            )
        assert "Radium glows." in text_of(answer)


async def test_the_doors_of_a2a(hub_factory: HubFactory, llm: FakeLLM) -> None:
    llm.script(Reply("An unexamined life..."))
    settings = {
        "api_keys": json.dumps(KEYS),
        "a2a_access": "authenticated",
        "max_message_bytes": 4096,
    }
    async with hub_factory(**settings) as hub:
        anonymous = await hub.http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        assert anonymous.status_code == 401
        assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")
        wrong = await hub.http.post("/mcp", json={}, headers={"X-API-Key": "not-a-key"})
        assert wrong.status_code == 401
        too_large = await hub.http.post(
            "/mcp",
            content=b"{" + b" " * 5000 + b"}",
            headers={"X-API-Key": ALICE_KEY, "Content-Type": "application/json"},
        )
        assert too_large.status_code == 413

        async with mcp_client(hub, Authorization=f"Bearer {SOCRATIC_KEY}") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {"socrates"}
            refused = await client.call_tool("marie-curie", {"message": "Hello"})
            assert refused.is_error
            assert "may not use persona 'marie-curie'" in text_of(refused)
            with anyio.fail_after(WAIT):
                answer = await client.call_tool("socrates", {"message": "Hello"})
            assert not answer.is_error
            task_id = (answer.structured_content or {})["task_id"]

        # The caller owns the task: another caller does not find it over A2A.
        async with httpx.AsyncClient(base_url=hub.settings.base_url, timeout=30) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
            headers = {"A2A-Version": "1.0"}
            mine = await http.post(
                "/a2a/socrates/", json=body, headers={**headers, "X-API-Key": SOCRATIC_KEY}
            )
            theirs = await http.post(
                "/a2a/socrates/", json=body, headers={**headers, "X-API-Key": ALICE_KEY}
            )
        assert mine.json()["result"]["id"] == task_id
        assert "error" in theirs.json()


async def test_a_panel_answers_over_mcp_as_over_a2a_each_member_under_its_name(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """Issue 48.3: the members' streamed turns ran together (``w0 w1w0 w1…``) in the
    answer and its progress; now the answer is the panel's final message, as A2A's, and
    each progress message is one member's turn under its name."""
    said = {
        "Albert Einstein": "Imagination is more important than knowledge.",
        "Marie Curie": "Nothing in life is to be feared, it is only to be understood.",
        "Charles Darwin": "It is not the strongest that survives.",
    }
    for name, text in said.items():
        llm.script_for(f"You are {name}.", Reply(text, token_delay=0.01))
    heard: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    async with hub_factory() as hub, mcp_client(hub) as client:
        with anyio.fail_after(WAIT * 3):
            answer = await client.call_tool(
                "science-panel", {"message": "What drives science?"}, progress_callback=progress
            )
    assert not answer.is_error, text_of(answer)
    rendered = "\n\n".join(f"{name}:\n{text}" for name, text in said.items())
    assert text_of(answer).startswith(rendered)
    assert heard
    for message in heard:
        name, _, text = message.partition(":\n")
        assert name in said, message
        assert said[name].startswith(text), message  # one member's turn, as it grew


async def test_an_unknown_persona_names_only_the_personas_the_caller_may_call(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    settings = {"api_keys": json.dumps(KEYS), "mcp_tools": "persona"}
    async with (
        hub_factory(**settings) as hub,
        mcp_client(hub, Authorization=f"Bearer {SOCRATIC_KEY}") as client,
    ):
        with pytest.raises(MCPError) as refused:  # no such tool: a JSON-RPC error
            await client.call_tool("nobody-here", {"message": "Hello"})
        message = refused.value.error.message
        assert refused.value.error.code == types.INVALID_PARAMS
        assert "No persona 'nobody-here'" in message
        assert "socrates" in message
        assert "marie-curie" not in message
        # ask_persona naming no persona: its result, which the calling model reads
        asked = await client.call_tool("ask_persona", {"persona": "nobody", "message": "Hi"})
        assert asked.is_error
        assert "No persona 'nobody' here (personas: socrates;" in text_of(asked)


async def test_arguments_that_do_not_fit_the_tool_are_a_result_the_model_reads(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """SEP-1303 (2025-11-25): input validation errors are tool results with ``isError``;
    every schema says ``additionalProperties: false``, and so does the hub."""
    async with hub_factory() as hub, mcp_client(hub) as client:
        cases: dict[str, tuple[str, dict[str, Any]]] = {
            "Unknown argument 'extra': the tool takes message, conversation_id": (
                "socrates",
                {"message": "hi", "extra": 1},
            ),
            "'message' must be a non-empty string": ("socrates", {"message": 42}),
            "'persona' must be a non-empty string": ("ask_persona", {"message": "hi"}),
            "'query' must be a string": ("list_personas", {"query": ["curie"]}),
        }
        for reason, (tool, arguments) in cases.items():
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            assert text_of(result) == reason
        assert not llm.requests  # no persona was asked


async def test_a_1_mib_message_is_answered_while_the_hub_serves_others(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """1 MiB of text through one ``tools/call``, with progress: the model receives all of
    it, ``/healthz`` is answered while the persona streams, and the progress carries the
    answer's end and its length (not the whole answer again and again). (1000 KiB: with
    the prompt, a request to the model of more than 1 MiB makes aiohttp warn that
    sending it may block the loop, and the tests make warnings errors.)"""
    big = "word " * (1000 * 1024 // 5)
    answer = "".join(f" w{i}" for i in range(1500))
    llm.script(Reply(answer, token_delay=0.005))
    heard: list[tuple[float, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, message))

    async with (
        hub_factory(max_message_bytes=2 * 1024 * 1024) as hub,
        mcp_client(hub, "legacy") as client,
    ):
        result: list[types.CallToolResult] = []

        async def call() -> None:
            arguments = {"message": big}
            result.append(await client.call_tool("socrates", arguments, progress_callback=progress))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await anyio.to_thread.run_sync(llm.wait_chunks, 1, 30)
                health = await hub.http.get("/healthz")
                assert health.status_code == 200
                assert not result  # answered while the persona still streams
        assert not result[0].is_error, text_of(result[0])
        assert answer in text_of(result[0])
        assert llm.requests[-1]["messages"][-1]["content"] == big
        assert heard[-1] == (float(len(answer)), "…" + answer[-2000:])


@pytest.mark.slow
async def test_persona_agent_mcp_serves_stdio(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM
) -> None:
    """``persona-agent mcp`` as a desktop client starts it: a process speaking on stdio."""
    llm.script(Reply("Through stdio, greetings."))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERSONA_AGENT_", "OPENAI_"))}
    env.update(
        {
            "PERSONA_AGENT_DATA_DIR": str(tmp_path / "data"),
            "PERSONA_AGENT_LLM_BASE_URL": llm.base_url,
            "PERSONA_AGENT_LLM_API_KEY": "test-key",
            "PERSONA_AGENT_WATCH_PERSONAS": "false",
        }
    )
    command = StdioServerParameters(
        command=sys.executable,
        args=["-m", "persona_agent.cli", "mcp", "-d", str(personas_dir)],
        env=env,
        cwd=str(tmp_path),
    )
    with anyio.fail_after(STARTUP):
        async with Client(command, cache=None) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "socrates" in names
            answer = await client.call_tool("socrates", {"message": "Hello over stdio"})
    assert "Through stdio, greetings." in text_of(answer)
    assert (answer.structured_content or {})["conversation_id"]
