"""The toolbox against the real test MCP server, over stdio ("local") and streamable HTTP
("remote"). Every wait is bounded; in-flight calls are observed through the server's
``sleepers`` tool, never by sleeping."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from persona_agent.errors import ToolError
from persona_agent.tools.config import MCPConfig
from persona_agent.tools.tool_specs import ToolInfo
from persona_agent.tools.toolbox import MCPToolbox
from tests.servers.mcp_servers import SERVER_SCRIPT, running_http_server, stdio_server_config

TRANSPORTS = [pytest.param("local", id="stdio"), pytest.param("remote", id="http")]
WAIT = 60.0
"""A bound, not a pause: starting an MCP server (a Python process) takes a busy two-core
machine seconds."""


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with running_http_server() as url:
        yield url


@pytest.fixture
def servers(http_url: str) -> dict[str, dict[str, Any]]:
    """Both test servers, as config entries; tests may change them before opening."""
    return {"local": stdio_server_config("local"), "remote": {"url": http_url}}


@asynccontextmanager
async def opened(servers: dict[str, dict[str, Any]], **options: Any) -> AsyncIterator[MCPToolbox]:
    toolbox = MCPToolbox(MCPConfig.model_validate({"servers": servers}), **options)
    try:
        async with asyncio.timeout(WAIT):
            await toolbox.start()
        yield toolbox
    finally:
        async with asyncio.timeout(WAIT):
            await toolbox.aclose()


@pytest.fixture
async def toolbox(servers: dict[str, dict[str, Any]]) -> AsyncIterator[MCPToolbox]:
    async with opened(servers) as opened_toolbox:
        yield opened_toolbox


async def sleepers(toolbox: MCPToolbox, server: str, tag: str) -> int:
    return int(await toolbox.call(f"{server}__sleepers", {"tag": tag}))


async def until_sleepers(toolbox: MCPToolbox, server: str, tag: str, count: int) -> None:
    """Ask the server (call after call, no sleeping) until ``count`` sleeps of ``tag`` run."""
    async with asyncio.timeout(WAIT):
        while await sleepers(toolbox, server, tag) != count:
            pass


def stdio_children() -> list[int]:
    """Our child processes running the test server over stdio (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        if parent == os.getpid() and str(SERVER_SCRIPT).encode() in cmdline and b"stdio" in cmdline:
            found.append(int(entry.name))
    return found


# --- start and listing ---------------------------------------------------------------


async def test_start_lists_namespaced_tools_of_both_servers(toolbox: MCPToolbox) -> None:
    names = {tool.name for tool in toolbox.tools()}
    for tool in ("add", "echo", "sleep", "fail", "crash", "whoami"):
        assert f"local__{tool}" in names
        assert f"remote__{tool}" in names
    assert toolbox.servers == {"local": "running", "remote": "running"}
    assert await toolbox.call("local__whoami", {}) == "stdio"
    assert await toolbox.call("remote__whoami", {}) == "http"


async def test_tools_carry_an_openai_spec(toolbox: MCPToolbox) -> None:
    (add,) = [tool for tool in toolbox.tools(["local__add"])]
    assert add.server == "local"
    assert add.description == "Add two integers."
    spec = add.openai_spec()
    assert spec["type"] == "function"
    assert spec["function"]["name"] == "local__add"
    assert spec["function"]["description"] == "Add two integers."
    parameters = spec["function"]["parameters"]
    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == {"a", "b"}
    assert toolbox.tool_specs(["local__add"]) == [spec]


def test_openai_spec_completes_a_bare_schema() -> None:
    tool = ToolInfo(name="s__t", server="s", description="", input_schema={})
    assert tool.openai_spec()["function"]["parameters"] == {"type": "object", "properties": {}}
    assert tool.remote_name == "t"


# --- calls ---------------------------------------------------------------------------


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_call_add_and_echo(toolbox: MCPToolbox, server: str) -> None:
    async with asyncio.timeout(WAIT):
        assert await toolbox.call(f"{server}__add", {"a": 2, "b": 40}) == "42"
        assert await toolbox.call(f"{server}__echo", {"text": "héllo\nworld"}) == "héllo\nworld"


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_tool_error_result_is_returned_as_text(toolbox: MCPToolbox, server: str) -> None:
    async with asyncio.timeout(WAIT):
        result = await toolbox.call(f"{server}__fail", {"message": "the well is dry"})
    assert result.startswith("Error: ")
    assert "the well is dry" in result


async def test_non_text_content_is_summarized(toolbox: MCPToolbox) -> None:
    async with asyncio.timeout(WAIT):
        assert await toolbox.call("local__picture", {}) == "[image: image/png]\na red dot"


async def test_invalid_arguments_are_a_tool_error_or_an_error_result(toolbox: MCPToolbox) -> None:
    async with asyncio.timeout(WAIT):
        try:
            result = await toolbox.call("local__add", {"a": "not a number"})
        except ToolError as error:
            result = error.message
    assert "rror" in result  # "Error: ..." from the tool, or the server's refusal
    assert await toolbox.call("local__add", {"a": 1, "b": 1}) == "2"


async def test_unknown_tool(toolbox: MCPToolbox) -> None:
    for name in ("local__nope", "nowhere__add", "add"):
        with pytest.raises(ToolError, match=f"Unknown tool '{name}'"):
            await toolbox.call(name, {})


async def test_calls_run_concurrently_on_one_server_and_across_servers(
    toolbox: MCPToolbox,
) -> None:
    tag = uuid.uuid4().hex
    calls = [
        asyncio.create_task(toolbox.call(f"{server}__sleep", {"seconds": 30, "tag": tag}))
        for server in ("local", "local", "remote")
    ]
    try:
        await until_sleepers(toolbox, "local", tag, 2)
        await until_sleepers(toolbox, "remote", tag, 1)
    finally:
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)


# --- allow-lists ---------------------------------------------------------------------


def test_allow_list_filters_tools(toolbox: MCPToolbox) -> None:
    everything = {tool.name for tool in toolbox.tools()}
    assert {tool.name for tool in toolbox.tools(None)} == everything
    assert toolbox.tools([]) == []
    local_only = {tool.name for tool in toolbox.tools(["local"])}
    assert local_only == {name for name in everything if name.startswith("local__")}
    mixed = {tool.name for tool in toolbox.tools(["local__add", "remote"])}
    assert "local__add" in mixed
    assert "local__echo" not in mixed
    assert {name for name in everything if name.startswith("remote__")} <= mixed
    assert toolbox.tools(["unknown", "local__nope"]) == []


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_allow_list_is_enforced_at_call_time(toolbox: MCPToolbox, server: str) -> None:
    add, echo = f"{server}__add", f"{server}__echo"
    for allow in ([], [f"{server}__echo"], ["elsewhere"]):
        with pytest.raises(ToolError, match=f"Tool '{add}' is not allowed for this persona"):
            await toolbox.call(add, {"a": 1, "b": 2}, allow=allow)
    assert await toolbox.call(echo, {"text": "ok"}, allow=[echo]) == "ok"
    assert await toolbox.call(add, {"a": 1, "b": 2}, allow=[server]) == "3"
    assert toolbox.is_allowed(add, [server])
    assert not toolbox.is_allowed(add, [echo])
    # Unknown and not allowed: refused as not allowed, without telling whether it exists.
    with pytest.raises(ToolError, match="not allowed"):
        await toolbox.call(f"{server}__nope", {}, allow=[echo])


# --- timeouts and cancellation -------------------------------------------------------


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_timeout_abandons_the_call_and_the_toolbox_still_works(
    servers: dict[str, dict[str, Any]], server: str
) -> None:
    # A timeout a quick call fits in on a busy machine, and a call that never ends in it.
    servers[server]["timeout"] = 2
    tag = uuid.uuid4().hex
    async with opened(servers) as toolbox:
        async with asyncio.timeout(WAIT):
            with pytest.raises(ToolError, match=rf"Tool '{server}__sleep' timed out after 2s"):
                await toolbox.call(f"{server}__sleep", {"seconds": 600, "tag": tag})
        await until_sleepers(toolbox, server, tag, 0)  # the server stopped the work too
        assert await toolbox.call(f"{server}__add", {"a": 1, "b": 2}) == "3"
        assert toolbox.servers[server] == "running"


async def test_default_timeout_applies_to_servers_without_one(
    servers: dict[str, dict[str, Any]],
) -> None:
    async with opened({"local": servers["local"]}, default_timeout=2) as toolbox:
        async with asyncio.timeout(WAIT):
            with pytest.raises(ToolError, match=r"timed out after 2s"):
                await toolbox.call("local__sleep", {"seconds": 600})


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_cancelling_the_caller_abandons_the_call(toolbox: MCPToolbox, server: str) -> None:
    tag = uuid.uuid4().hex
    call = asyncio.create_task(toolbox.call(f"{server}__sleep", {"seconds": 30, "tag": tag}))
    await until_sleepers(toolbox, server, tag, 1)

    call.cancel()
    async with asyncio.timeout(WAIT):
        with pytest.raises(asyncio.CancelledError):
            await call
    await until_sleepers(toolbox, server, tag, 0)  # the server was told, and stopped
    assert await toolbox.call(f"{server}__add", {"a": 2, "b": 2}) == "4"


# --- failures and restarts -----------------------------------------------------------


async def test_crashed_stdio_server_is_restarted_by_the_next_call(
    toolbox: MCPToolbox, caplog: pytest.LogCaptureFixture
) -> None:
    first_pid = await toolbox.call("local__pid", {})
    caplog.set_level(logging.INFO, logger="persona_agent.tools")
    async with asyncio.timeout(WAIT):
        with pytest.raises(ToolError, match="server 'local' stopped during the call"):
            await toolbox.call("local__crash", {})
        assert toolbox.servers["local"].startswith("stopped:")

        assert await toolbox.call("local__add", {"a": 1, "b": 2}) == "3"
    assert toolbox.servers["local"] == "running"
    assert await toolbox.call("local__pid", {}) != first_pid
    assert "restarting" in caplog.text
    assert "restarted" in caplog.text
    assert await toolbox.call("remote__add", {"a": 1, "b": 1}) == "2"  # untouched


async def test_server_that_cannot_restart_gives_a_tool_error(
    tmp_path: Path, servers: dict[str, dict[str, Any]]
) -> None:
    # A server whose command disappears after it started.
    launcher = tmp_path / "launch-server"
    launcher.write_text(f'#!/bin/sh\nexec "{servers["local"]["command"]}" "$@"\n')
    launcher.chmod(0o755)
    local = {**servers["local"], "command": str(launcher)}
    async with opened({"local": local}) as toolbox, asyncio.timeout(WAIT):
        launcher.unlink()
        with pytest.raises(ToolError):
            await toolbox.call("local__crash", {})
        with pytest.raises(ToolError, match="'local__add' is unavailable"):
            await toolbox.call("local__add", {"a": 1, "b": 2})
        assert toolbox.servers["local"].startswith("failed:")


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param({"command": "/nonexistent/mcp-server"}, id="missing-command"),
        pytest.param({"url": "http://127.0.0.1:9/mcp"}, id="nothing-listening"),
        pytest.param(
            {"command": "python3", "args": ["-c", "import sys; sys.exit(3)"]}, id="exits-at-once"
        ),
    ],
)
async def test_server_that_fails_to_start_is_skipped_with_a_warning(
    servers: dict[str, dict[str, Any]],
    broken: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="persona_agent.tools")
    async with opened({"broken": broken, **servers}) as toolbox:
        assert toolbox.servers["broken"].startswith("failed: ")
        assert toolbox.servers["local"] == "running"
        assert toolbox.servers["remote"] == "running"
        assert not [tool for tool in toolbox.tools() if tool.server == "broken"]
        assert await toolbox.call("local__add", {"a": 1, "b": 2}) == "3"
        assert await toolbox.call("remote__add", {"a": 1, "b": 2}) == "3"
        with pytest.raises(ToolError, match="Unknown tool"):
            await toolbox.call("broken__add", {})
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert [message for message in warnings if "'broken' did not start" in message]


async def test_server_that_never_answers_is_given_up_after_the_connect_timeout() -> None:
    silent = {"command": "python3", "args": ["-c", "import time; time.sleep(60)"]}
    async with opened({"silent": silent}, connect_timeout=0.5) as toolbox:
        assert toolbox.servers["silent"] == "failed: no answer within 0.5s"


# --- tool list changes ---------------------------------------------------------------


@pytest.mark.parametrize("server", TRANSPORTS)
async def test_tool_list_is_refreshed_on_list_changed(
    servers: dict[str, dict[str, Any]], server: str
) -> None:
    changed = asyncio.Event()
    async with opened(servers, on_tools_changed=lambda name: changed.set()) as toolbox:
        grown = f"grown_{uuid.uuid4().hex[:8]}"
        assert f"{server}__{grown}" not in {tool.name for tool in toolbox.tools()}
        await toolbox.call(f"{server}__grow", {"name": grown})
        async with asyncio.timeout(WAIT):
            while f"{server}__{grown}" not in {tool.name for tool in toolbox.tools()}:
                changed.clear()
                await changed.wait()
            assert await toolbox.call(f"{server}__{grown}", {"text": "new"}) == "new"


async def test_unsafe_tool_names_are_sanitized_and_mapped_back(
    servers: dict[str, dict[str, Any]],
) -> None:
    changed = asyncio.Event()
    local = {"local": servers["local"]}
    async with opened(local, on_tools_changed=lambda name: changed.set()) as toolbox:
        await toolbox.call("local__grow", {"name": "dotted.name"})
        async with asyncio.timeout(WAIT):
            while "local__dotted_name" not in {tool.name for tool in toolbox.tools()}:
                changed.clear()
                await changed.wait()
            assert await toolbox.call("local__dotted_name", {"text": "mapped"}) == "mapped"


# --- closing -------------------------------------------------------------------------


async def test_aclose_is_idempotent_and_leaves_no_child_process(
    servers: dict[str, dict[str, Any]],
) -> None:
    toolbox = MCPToolbox(MCPConfig.model_validate({"servers": servers}))
    async with asyncio.timeout(WAIT):
        await toolbox.start()
        pid = int(await toolbox.call("local__pid", {}))
        assert pid in stdio_children()

        await toolbox.aclose()
        await toolbox.aclose()

    assert stdio_children() == []
    assert toolbox.servers == {"local": "closed", "remote": "closed"}
    with pytest.raises(ToolError):
        await toolbox.call("local__add", {"a": 1, "b": 2})


async def test_toolbox_without_servers() -> None:
    async with MCPToolbox(MCPConfig()) as toolbox:
        assert toolbox.tools() == []
        assert toolbox.servers == {}
        with pytest.raises(ToolError, match="Unknown tool"):
            await toolbox.call("local__add", {})
