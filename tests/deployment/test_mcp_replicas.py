"""``/mcp`` on two real replicas (PostgreSQL) behind a real nginx running
``deploy/nginx.conf``: the ``mcp`` SDK's client in both protocol eras (the handshake,
2025-11-25, and 2026-07-28) lists, calls a persona again and again while nginx takes turns
over the replicas, and cancels a call; a handshake-era cancel that reaches the other
replica than the call's stops the persona all the same (docs/mcp.md#replicas)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import httpx
import httpx2
import mcp.types as types
import pytest
from mcp.client import Client
from mcp.client.client import ConnectMode
from mcp.client.streamable_http import streamable_http_client

from tests.conformance.conftest import wait_until
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.conftest import BUNDLED
from tests.servers.replicas import ReplicaSet, replica_set

WAIT = 30
"""Seconds any one step may take (the machine is shared)."""


@pytest.fixture(scope="module")
def mcp_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as llm:
        yield llm


@pytest.fixture(scope="module")
def mcp_replicas(
    tmp_path_factory: pytest.TempPathFactory, mcp_llm: FakeLLM
) -> Iterator[ReplicaSet]:
    root = tmp_path_factory.mktemp("mcp-replicas")
    personas_dir = root / "personas"
    shutil.copytree(BUNDLED, personas_dir)
    with replica_set(
        2,
        personas_dir,
        root,
        LLM_BASE_URL=mcp_llm.base_url,
        LLM_API_KEY="test",
        LLM_MAX_RETRIES="0",
    ) as replicas:
        yield replicas


@asynccontextmanager
async def _client(url: str, mode: ConnectMode) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(timeout=WAIT) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http), cache=None, mode=mode
        ) as client,
    ):
        yield client


def _text(result: types.CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, types.TextContent))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_every_era_calls_personas_through_any_replica(
    mcp_replicas: ReplicaSet, mcp_llm: FakeLLM, mode: ConnectMode
) -> None:
    mcp_llm.reset()
    try:
        asyncio.run(_calls(mcp_replicas, mcp_llm, mode))
    except BaseException:
        print(mcp_replicas.proxy.access_log()[-4000:])
        for replica in mcp_replicas.replicas:
            print(replica.output()[-4000:])
        raise
    upstreams = set(mcp_replicas.proxy.upstreams("/mcp"))
    ports = {f"127.0.0.1:{port}" for port in mcp_replicas.ports}
    assert ports <= upstreams, f"nginx sent /mcp to {upstreams} only"
    assert "Session not found" not in "".join(r.output() for r in mcp_replicas.replicas)


async def _calls(replicas: ReplicaSet, llm: FakeLLM, mode: ConnectMode) -> None:
    answers = [f"Answer {i} from the agora." for i in range(6)]
    llm.script(*(Reply(answer) for answer in answers))
    async with _client(replicas.front, mode) as client:
        with anyio.fail_after(WAIT):
            tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "socrates" in tools
        conversation = ""
        for answer in answers:
            arguments = {"message": "Speak", "conversation_id": conversation}
            with anyio.fail_after(WAIT):
                result = await client.call_tool("socrates", arguments)
            assert not result.is_error, _text(result)
            assert answer in _text(result)
            conversation = (result.structured_content or {})["conversation_id"]
        # The conversation went on whichever replica answered each call.
        earlier = json.dumps(llm.requests[-1]["messages"])
        assert answers[0] in earlier

        # Cancelled twice: nginx takes turns, so the call and its cancel go to the replicas
        # in both orders at least once in two tries (and the handshake era's cancel POST
        # is one more request than the call's).
        for _ in range(2):
            llm.script(Hang())
            asked, disconnects = len(llm.requests), llm.disconnects

            async def asked_more(asked: int = asked) -> bool:
                return len(llm.requests) > asked

            async def dropped(disconnects: int = disconnects) -> bool:
                return llm.disconnects > disconnects

            async with anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "socrates", {"message": "Think forever."})
                await wait_until("the model asked", asked_more, seconds=WAIT)
                group.cancel_scope.cancel()
            # The persona's task is canceled, and with it the model's stream.
            await wait_until("the model's stream closed", dropped, seconds=WAIT)


def test_a_handshake_cancel_on_the_other_replica_stops_the_call(
    mcp_replicas: ReplicaSet, mcp_llm: FakeLLM
) -> None:
    """The call's POST on one replica, its ``notifications/cancelled`` on the other:
    the cluster's cancel channel takes it to the replica running the call."""
    mcp_llm.reset()
    asyncio.run(_cancel_across(mcp_replicas, mcp_llm))


async def _cancel_across(replicas: ReplicaSet, llm: FakeLLM) -> None:
    one, other = (replica.url for replica in replicas.replicas)
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    llm.script(Hang())
    async with httpx.AsyncClient(timeout=WAIT) as http:
        opened = await http.post(f"{one}/mcp", json=initialize, headers=headers)
        assert opened.status_code == 200, opened.text
        label = opened.headers["mcp-session-id"]  # a client label, not a session
        headers["Mcp-Session-Id"] = label
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "socrates", "arguments": {"message": "Think forever."}},
        }

        async def calling() -> httpx.Response:
            return await http.post(f"{one}/mcp", json=call, headers=headers)

        running = asyncio.create_task(calling())
        await asyncio.to_thread(llm.wait_requests, 1, WAIT)
        # Another client of the same caller cancels its own request 7: not this call.
        stranger = {**headers, "Mcp-Session-Id": "another-client"}
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "changed my mind"},
        }
        refused = await http.post(f"{other}/mcp", json=cancel, headers=stranger)
        assert refused.status_code == 202
        await asyncio.sleep(0.5)  # room for a wrong cancel to arrive (it must not)
        assert llm.disconnects == 0
        assert not running.done()

        answered = await http.post(f"{other}/mcp", json=cancel, headers=headers)
        assert answered.status_code == 202
        async with asyncio.timeout(WAIT):
            await asyncio.to_thread(llm.wait_disconnect, WAIT)
            response = await running
        assert response.status_code == 200
        assert "canceled" in response.text
        # No session to follow: the GET stream is not offered, and there is nothing to end.
        stream = await http.get(f"{other}/mcp", headers=headers)
        assert stream.status_code == 405
        ended = await http.delete(f"{other}/mcp", headers=headers)
        assert ended.status_code == 204
