"""A real MCP server for tests: ``testtools``, over stdio or streamable HTTP.

Run it as ``python tests/servers/mcp_tools_server.py stdio`` or
``python tests/servers/mcp_tools_server.py http --port N`` (streamable HTTP on
``http://127.0.0.1:N/mcp``; ``--port 0`` picks a free port). Over HTTP it
prints ``PORT <n>`` on stdout once it accepts connections. Tools:

- ``add(a, b)``, ``echo(text)``: plain answers;
- ``sleep(seconds, tag)``: answers after a while (timeouts, cancellation);
  ``sleepers(tag)`` counts the ``sleep`` calls of that tag still running, so a
  test can see a call arrive, and see it abandoned, without sleeping itself;
- ``fail(message)``: raises, so the result has ``isError`` set;
- ``crash()``: ends the process at once (restarts; meaningful over stdio only);
- ``whoami()``: the transport name, so tests can tell servers apart;
- ``pid()``: the server's process id (a restart changes it);
- ``traceparent()``: the W3C ``traceparent`` the call came with, as JSON: in the MCP
  request's ``params._meta`` (``meta``) and, over HTTP, in its headers (``header``);
- ``picture()``: an image and a text, to test non-text content;
- ``grow(name)``: adds a tool ``name`` (echoing its text) and announces the
  changed tool list, for the ``list_changed`` refresh.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
from collections import Counter

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def build_server(transport: str) -> MCPServer:
    server = MCPServer("testtools", log_level="WARNING")
    sleeping: Counter[str] = Counter()

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def sleep(seconds: float, tag: str = "") -> str:
        """Sleep for some seconds, then say so."""
        sleeping[tag] += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            sleeping[tag] -= 1
        return f"slept {seconds}s"

    @server.tool()
    def sleepers(tag: str = "") -> int:
        """How many sleep calls of this tag are running."""
        return sleeping[tag]

    @server.tool()
    def fail(message: str) -> str:
        """Always fail with the given message."""
        raise ToolError(message)

    @server.tool()
    def crash() -> str:
        """End the server process at once."""
        os._exit(1)

    @server.tool()
    def whoami() -> str:
        """The transport this server runs on."""
        return transport

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def traceparent(ctx: Context) -> str:
        """The W3C trace context this call came with."""
        meta: dict[str, object] = dict(ctx.request_context.meta or {})
        headers = ctx.headers or {}
        return json.dumps({"meta": meta.get("traceparent"), "header": headers.get("traceparent")})

    @server.tool(structured_output=False)
    def picture() -> list[object]:
        """A tiny picture and its caption."""
        return [Image(data=PNG_1X1, format="png"), "a red dot"]

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool ``name`` that echoes its text, and announce the changed tool list."""

        def grown(text: str) -> str:
            return text

        server.add_tool(grown, name=name, description=f"The grown tool {name}.")
        await ctx.notify_tools_changed()  # subscriptions/listen (2026-07-28 connections)
        with contextlib.suppress(Exception):  # notifications/tools/list_changed (earlier ones)
            await ctx.session.send_tool_list_changed()
        return f"added {name}"

    return server


def serve_http(port: int) -> None:
    """Streamable HTTP at ``/mcp``; ``PORT <n>`` on stdout once the socket listens."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    app = build_server("http").streamable_http_app(streamable_http_path="/mcp")
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        build_server("stdio").run("stdio")
    else:
        serve_http(args.port)


if __name__ == "__main__":
    main()
