"""Slow clients are disconnected: a real ``persona-agent serve`` and raw sockets that send
a request's head, or its body, a byte at a time ("slowloris")."""

from __future__ import annotations

import select
import shutil
import socket
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.personas import BUNDLED
from tests.servers.hub_process import hub_process

BOUND = 30.0
"""Seconds after which the test gives up: far above the hub's timeouts (0.5 s), so only a
hub that never disconnects reaches it."""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    root = tmp_path_factory.mktemp("slow")
    shutil.copytree(BUNDLED, root / "personas")
    settings = {
        "LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "LLM_API_KEY": "unused",
        "REQUEST_HEAD_TIMEOUT": "0.5",
        "REQUEST_BODY_TIMEOUT": "0.5",
    }
    with hub_process(root / "personas", root / "data", **settings) as running:
        yield running


def trickle(url: str, first: bytes, then: bytes) -> bytes:
    """Send ``first``, then ``then`` a byte at a time, each once the server has said nothing
    for 0.1 s; what the server sent before it closed the connection."""
    host, port = url.removeprefix("http://").split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=BOUND) as sock:
        sock.sendall(first)
        for byte in then:
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                chunk = sock.recv(65_536)
                if not chunk:
                    return received
                received += chunk
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                return received
        raise AssertionError(f"the hub still listened after {len(then)} trickled bytes")


def test_a_head_sent_a_byte_at_a_time_is_cut_off(hub: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = hub
    endless_header = b"X-Slow: " + b"a" * 3000  # 300 s at 0.1 s a byte
    trickle(url, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", endless_header)
    assert httpx.get(f"{url}/healthz").status_code == 200


def test_a_connection_that_sends_nothing_is_cut_off(hub: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = hub
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=BOUND) as sock:
        assert sock.recv(1) == b""  # closed by the hub, long before the bound


def test_a_body_sent_a_byte_at_a_time_is_cut_off(hub: tuple[str, subprocess.Popen[str]]) -> None:
    url, _ = hub
    head = (
        b"POST /a2a/socrates/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 3000\r\n\r\n"
    )
    trickle(url, head, b"{" + b" " * 2999)
    assert httpx.get(f"{url}/healthz").status_code == 200


def test_a_prompt_client_and_a_keep_alive_connection_are_served(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = hub
    with httpx.Client(base_url=url) as client:  # one connection, several requests
        for _ in range(3):
            assert client.get("/healthz").status_code == 200
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        reply = client.post("/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"})
        assert reply.json()["error"]["code"] == -32001
