"""``/mcp`` sessions held to their callers (docs/mcp.md#sessions), as an attacker tries
them with the ``mcp`` SDK's own client (the handshake era: ``mode="legacy"``) and raw
HTTP against the hub on a real uvicorn: one caller opening sessions past its cap while
another connects, a session kept alive by pings alone, an anonymous client with an
operator's session id, session ids in the logs.

Without :mod:`persona_agent.api.mcp.mcp_sessions` the SDK keeps 10,000 sessions of anyone
for 30 minutes of pings, and serves (and deletes) a session for whoever names it: each
test here fails then.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError

from tests.conformance.conftest import wait_until
from tests.fakes.fake_llm import FakeLLM, Hang
from tests.integration.conftest import Hub, HubFactory
from tests.integration.test_mcp_server import mcp_client

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"
CAROL = "carol-key-0123456789abcdef"
SOCRATIC = "socratic-key-0123456789abcd"
KEYS = [
    {"name": "alice", "key": ALICE},
    {"name": "bob", "key": BOB},
    {"name": "carol", "key": CAROL},
    {"name": "socratic", "key": SOCRATIC, "personas": ["socrates"]},
]
WAIT = 15
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "attacker", "version": "1"},
    },
}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
PING = {"jsonrpc": "2.0", "id": 3, "method": "ping"}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs: no persona here calls a tool."""
    return None


def keyed(**settings: Any) -> dict[str, Any]:
    return {"api_keys": json.dumps(KEYS), **settings}


@asynccontextmanager
async def raw(hub: Hub, key: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """Plain HTTP to the hub as the caller of ``key`` (none: anonymous)."""
    headers = {**HEADERS, **({"X-API-Key": key} if key else {})}
    async with httpx.AsyncClient(
        base_url=hub.settings.base_url, headers=headers, timeout=30
    ) as http:
        yield http


async def open_session(http: httpx.AsyncClient) -> str:
    """``initialize`` and ``notifications/initialized``: the new session's id."""
    opened = await http.post("/mcp", json=INITIALIZE)
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await http.post("/mcp", json=ready, headers=_in(session_id))
    assert done.status_code == 202, done.text
    return session_id


def _in(session_id: str) -> dict[str, str]:
    return {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


async def session_lives(http: httpx.AsyncClient, session_id: str) -> bool:
    """Whether the session answers a ping (which is no use of it: it keeps it no longer)."""
    pinged = await http.post("/mcp", json=PING, headers=_in(session_id))
    assert pinged.status_code in (200, 404), pinged.text
    return pinged.status_code == 200


async def test_a_caller_past_its_cap_loses_its_least_used_idle_session_not_others(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(**keyed(mcp_sessions_per_caller=2)) as hub, AsyncExitStack() as stack:
        alice = [
            await stack.enter_async_context(mcp_client(hub, "legacy", **{"X-API-Key": ALICE}))
            for _ in range(2)
        ]
        bob = await stack.enter_async_context(mcp_client(hub, "legacy", **{"X-API-Key": BOB}))
        await alice[0].list_tools()  # alice's second session is now her least used
        third = await stack.enter_async_context(mcp_client(hub, "legacy", **{"X-API-Key": ALICE}))
        assert (await third.list_tools()).tools
        with pytest.raises(MCPError, match=r"Session (not found|terminated)"):
            await alice[1].list_tools()
        assert (await alice[0].list_tools()).tools
        assert (await bob.list_tools()).tools  # the other caller kept his session
        async with mcp_client(hub, "legacy", **{"X-API-Key": BOB}) as again:
            assert (await again.list_tools()).tools  # and opens more


async def test_sessions_busy_to_the_cap_refuse_a_new_one_and_the_hub_has_a_total(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path
) -> None:
    llm.script(Hang())
    audit = tmp_path / "audit.jsonl"
    settings = keyed(mcp_sessions_per_caller=1, mcp_sessions_max=2, audit_log=str(audit))
    async with (
        hub_factory(**settings) as hub,
        mcp_client(hub, "legacy", **{"X-API-Key": ALICE}) as alice,
        raw(hub, ALICE) as alice_raw,
        raw(hub, BOB) as bob_raw,
        raw(hub, CAROL) as carol_raw,
    ):
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as group:
                group.start_soon(alice.call_tool, "socrates", {"message": "Think forever."})
                await anyio.to_thread.run_sync(llm.wait_requests, 1, WAIT)
                # Alice's one session has a call in flight: no room for another of hers.
                refused = await alice_raw.post("/mcp", json=INITIALIZE)
                assert refused.status_code == 429, refused.text
                assert "PERSONA_AGENT_MCP_SESSIONS_PER_CALLER" in refused.json()["error"]["message"]
                await open_session(bob_raw)
                # Two sessions open: the hub's most.
                full = await carol_raw.post("/mcp", json=INITIALIZE)
                assert full.status_code == 503, full.text
                assert "PERSONA_AGENT_MCP_SESSIONS_MAX" in full.json()["error"]["message"]
                assert int(full.headers["Retry-After"]) > 0
                group.cancel_scope.cancel()
    events = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    audited = [
        (e["principal"], e["outcome"]) for e in events if e["action"] == "mcp.session.refused"
    ]
    assert audited == [("key:alice", "429"), ("key:carol", "503")]


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # ping, 2025
async def test_pings_do_not_keep_a_session_past_its_idle_timeout(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with (
        hub_factory(mcp_session_idle_timeout=3.0) as hub,
        mcp_client(hub, "legacy") as client,
    ):
        assert (await client.list_tools()).tools

        async def ping_while_it_answers() -> None:  # five pings a second
            while True:
                await client.send_ping()
                await anyio.sleep(0.2)

        with (
            anyio.fail_after(WAIT),
            pytest.raises(MCPError, match=r"Session (not found|terminated)"),
        ):
            await ping_while_it_answers()
        async with mcp_client(hub, "legacy") as fresh:
            assert (await fresh.list_tools()).tools


async def test_a_session_serves_the_caller_that_opened_it_alone(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with (
        hub_factory(**keyed()) as hub,
        raw(hub, ALICE) as alice,
        raw(hub) as anonymous,
        raw(hub, BOB) as bob,
    ):
        session_id = await open_session(alice)
        for intruder in (anonymous, bob):
            used = await intruder.post("/mcp", json=TOOLS_LIST, headers=_in(session_id))
            assert used.status_code == 404, used.text
            assert used.json()["error"]["message"] == "Session not found"
            deleted = await intruder.delete("/mcp", headers=_in(session_id))
            assert deleted.status_code == 404, deleted.text
        assert await session_lives(alice, session_id)
        ended = await alice.delete("/mcp", headers=_in(session_id))
        assert ended.status_code == 200, ended.text
        assert not await session_lives(alice, session_id)


async def test_session_ids_stay_out_of_the_logs(
    hub_factory: HubFactory, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with hub_factory(mcp_session_idle_timeout=3.0) as hub, raw(hub) as http:
        deleted = await open_session(http)
        assert await session_lives(http, deleted)
        assert (await http.delete("/mcp", headers=_in(deleted))).status_code == 200
        idle = await open_session(http)

        async def closed() -> bool:
            return not await session_lives(http, idle)

        await wait_until("the idle session closed", closed, seconds=WAIT)
    hub_side = [r for r in caplog.records if not r.name.startswith("mcp.client")]
    lines = "\n".join(record.getMessage() for record in hub_side)
    assert "Created new transport with session ID: session#" in lines  # the SDK's, quieted
    assert deleted not in lines
    assert idle not in lines
