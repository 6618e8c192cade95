"""Start the test MCP server (tests/servers/mcp_tools_server.py) for tests.

Synchronous helpers, so they also serve session-scoped fixtures::

    config = {"servers": {"local": stdio_server_config(), "remote": {"url": url}}}
    with running_http_server() as url: ...
"""

from __future__ import annotations

import contextlib
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["SERVER_SCRIPT", "running_http_server", "stdio_server_config"]

SERVER_SCRIPT = Path(__file__).resolve().with_name("mcp_tools_server.py")
START_TIMEOUT = 120.0
"""Seconds after which a test server that does not listen is given up on: a safety bound
against a hang (a start returns as soon as it listens)."""
STOP_TIMEOUT = 5.0


def stdio_server_config(name: str = "local", **overrides: Any) -> dict[str, Any]:
    """The config entry of the test server over stdio (``overrides``: e.g. ``timeout=5``).

    ``name`` is the server name the caller files it under; the entry does not depend on it.
    """
    del name
    return {"command": sys.executable, "args": [str(SERVER_SCRIPT), "stdio"], **overrides}


@contextlib.contextmanager
def running_http_server() -> Iterator[str]:
    """Run the test server over streamable HTTP on a free 127.0.0.1 port; yield its ``/mcp`` URL.

    Waits (at most ``START_TIMEOUT`` seconds) until the server listens; stops it afterwards.
    """
    process = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "http", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = _read_port(process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT)
        if process.stdout is not None:
            process.stdout.close()


def _read_port(process: subprocess.Popen[str]) -> int:
    """The port the server prints as ``PORT <n>`` once it listens."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"the MCP test server did not start in {START_TIMEOUT:g}s")
            if not selector.select(remaining):
                continue
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the MCP test server exited with code {process.wait()}")
            if line.startswith("PORT "):
                return int(line.split()[1])
