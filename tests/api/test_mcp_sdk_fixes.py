"""Canaries: the ``mcp`` SDK's server as shipped still behaves as the hub's corrections
assume (``api/mcp/mcp_sdk_fixes.py``, ``api/mcp/mcp_sessions.py``).

Each test runs the SDK alone (its low-level server and session manager, no hub) over
HTTP (httpx's ASGI transport) and asserts the behaviour the hub corrects. When one fails,
the SDK changed: check it and drop or simplify the correction it names.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import httpx
import pytest
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from persona_agent.api.mcp.mcp_sdk_fixes import SESSION_ID_FILTER, SESSION_LOGGERS, STATELESS_END
from persona_agent.settings import Settings

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "canary", "version": "1"},
    },
}
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}


@asynccontextmanager
async def sdk_alone(**options: float) -> AsyncIterator[httpx.AsyncClient]:
    """The SDK's session manager on a bare server, as shipped, and a client to it."""
    manager = StreamableHTTPSessionManager(Server("canary"), **options)  # type: ignore[arg-type]
    async with (
        manager.run(),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.handle_request),
            base_url="http://127.0.0.1",
            headers=HEADERS,
        ) as http,
    ):
        yield http


async def open_session(http: httpx.AsyncClient, **headers: str) -> str:
    opened = await http.post("/mcp", json=INITIALIZE, headers=headers)
    assert opened.status_code == 200, opened.text
    return opened.headers["mcp-session-id"]


def of(session_id: str, **headers: str) -> dict[str, str]:
    return {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25", **headers}


@contextmanager
def sdk_logging_as_shipped() -> Iterator[None]:
    """The SDK's session loggers without the hub's filter (another test's hub added it)."""
    loggers = [logging.getLogger(name) for name in SESSION_LOGGERS]
    for sdk_logger in loggers:
        sdk_logger.removeFilter(SESSION_ID_FILTER)
    try:
        yield
    finally:
        for sdk_logger in loggers:
            sdk_logger.addFilter(SESSION_ID_FILTER)


async def test_the_sdk_writes_session_ids_into_info_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """quiet_session_ids: the SDK logs each new session's id at INFO."""
    caplog.set_level(logging.INFO)
    with sdk_logging_as_shipped():
        async with sdk_alone() as http:
            session_id = await open_session(http)
    shown = [
        r for r in caplog.records if r.levelno == logging.INFO and session_id in r.getMessage()
    ]
    assert shown


async def test_a_stateless_sdk_writes_a_line_at_each_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """quiet_session_ids: a stateless manager logs ``Terminating session: None`` at INFO
    as each request ends; the hub's filter drops that line, and only that one."""
    caplog.set_level(logging.INFO)
    with sdk_logging_as_shipped():
        async with sdk_alone(stateless=True) as http:
            answered = await http.post("/mcp", json=INITIALIZE)
            assert answered.status_code == 200
    ends = [r for r in caplog.records if r.getMessage() == STATELESS_END]
    assert ends
    assert all(r.levelno == logging.INFO for r in ends)
    assert not SESSION_ID_FILTER.filter(ends[0])
    other = logging.LogRecord("mcp.server.streamable_http", logging.INFO, "", 0, "x", None, None)
    assert SESSION_ID_FILTER.filter(other)


async def test_the_sdk_serves_a_session_to_whoever_names_it() -> None:
    """McpSessions binds sessions to callers: the SDK binds them only to its own OAuth user,
    so a request with other credentials (or none) uses and ends another's session."""
    async with sdk_alone() as http:
        session_id = await open_session(http, **{"X-API-Key": "the-operators-key"})
        pinged = await http.post("/mcp", json=PING, headers=of(session_id))
        assert pinged.status_code == 200, pinged.text
        ended = await http.delete("/mcp", headers=of(session_id))
        assert ended.status_code == 200, ended.text


async def test_the_sdk_keeps_a_pinged_session_past_its_idle_timeout() -> None:
    """McpSessions measures idleness on tool and list calls: the SDK counts any request
    (a ping) as use, so pings keep a session past its idle timeout."""
    async with sdk_alone(session_idle_timeout=1.0) as http:
        session_id = await open_session(http)
        for _ in range(30):  # 3 s of pings, three idle timeouts
            pinged = await http.post("/mcp", json=PING, headers=of(session_id))
            assert pinged.status_code == 200, pinged.text
            await anyio.sleep(0.1)


async def test_the_sdk_opens_sessions_for_one_caller_past_the_hubs_cap() -> None:
    """McpSessions caps sessions a caller (16 by default): the SDK's only cap is its total
    (10,000), whoever opens them."""
    cap = Settings.model_fields["mcp_sessions_per_caller"].default
    async with sdk_alone() as http:
        opened = {await open_session(http, **{"X-API-Key": "one-key"}) for _ in range(cap + 4)}
    assert len(opened) == cap + 4
