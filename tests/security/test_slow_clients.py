"""Slow clients are disconnected: a real ``persona-agent serve`` and raw sockets that send
a request's head, or its body, a byte at a time ("slowloris")."""

from __future__ import annotations

import json
import select
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.personas import BUNDLED
from tests.servers.hub_process import hub_process

BOUND = 30.0
"""Seconds after which the test gives up: far above the hub's timeouts (``TIMEOUT``), so
only a hub that never disconnects reaches it."""


TIMEOUT = 0.5
"""The hub's head and body timeouts, in seconds."""


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    root = tmp_path_factory.mktemp("slow")
    shutil.copytree(BUNDLED, root / "personas")
    settings = {
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "unused",
        "REQUEST_HEAD_TIMEOUT": str(TIMEOUT),
        "REQUEST_BODY_TIMEOUT": str(TIMEOUT),
    }
    with hub_process(root / "personas", root / "data", **settings) as running:
        yield running


def trickle(url: str, first: bytes, then: bytes) -> bytes:
    """Send ``first``, then ``then`` a byte at a time, each once the server has said nothing
    for 0.1 s; what the server sent before it closed the connection. A server that closes
    with bytes of ours unread resets the connection, which the next read or write meets:
    closed all the same (what was read before is kept)."""
    host, port = url.removeprefix("http://").split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=BOUND) as sock:
        sock.sendall(first)
        for byte in then:
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                try:
                    chunk = sock.recv(65_536)
                except ConnectionResetError:  # closed with our bytes unread: a reset
                    return received
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


def slow_reply() -> Reply:
    """An answer that takes the model four times the hub's timeouts (one before each chunk)."""
    return Reply("Know thyself, slowly, friend.", token_delay=TIMEOUT)


def send_message(text: str) -> bytes:
    """A whole JSON-RPC SendMessage request, as bytes on the wire."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": text,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                }
            },
        }
    ).encode()
    head = (
        "POST /a2a/socrates/ HTTP/1.1\r\nHost: 127.0.0.1\r\nA2A-Version: 1.0\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def answers(url: str, requests: bytes, count: int) -> list[httpx.Response]:
    """Send ``requests`` at once on one connection (pipelined); the first ``count`` answers."""
    host, port = url.removeprefix("http://").split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=BOUND) as sock:
        sock.sendall(requests)
        while received.count(b"HTTP/1.1 ") < count or not _whole(received, count):
            chunk = sock.recv(65_536)
            assert chunk, f"the hub closed the connection after {received!r}"
            received += chunk
    return _parsed(received, count)


def _whole(received: bytes, count: int) -> bool:
    try:
        _parsed(received, count)
    except ValueError:
        return False
    return True


def _parsed(received: bytes, count: int) -> list[httpx.Response]:
    replies = []
    rest = received
    for _ in range(count):
        head, separator, rest = rest.partition(b"\r\n\r\n")
        if not separator:
            raise ValueError("incomplete head")
        lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        length = int(headers.get("content-length", "0"))
        if len(rest) < length:
            raise ValueError("incomplete body")
        replies.append(httpx.Response(int(lines[0].split()[1]), content=rest[:length]))
        rest = rest[length:]
    return replies


def test_an_answer_slower_than_the_timeouts_is_not_cut_off(
    hub: tuple[str, subprocess.Popen[str]], llm: FakeLLM
) -> None:
    url, _ = hub
    llm.script(slow_reply())
    [reply] = answers(url, send_message("Who are you?"), 1)
    assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_pipelined_requests_waiting_for_a_slow_answer_are_not_cut_off(
    hub: tuple[str, subprocess.Popen[str]], llm: FakeLLM
) -> None:
    # The second request waits, whole, on its connection while the first is answered
    # (uvicorn reads no more meanwhile); then its own answer is as slow.
    url, _ = hub
    llm.script(slow_reply(), slow_reply())
    replies = answers(url, send_message("First?") + send_message("Second?"), 2)
    for reply, question in zip(replies, ["First?", "Second?"], strict=True):
        assert reply.json()["id"] == question
        assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_pipelined_request_is_timed_once_the_hub_reads_it(
    hub: tuple[str, subprocess.Popen[str]], llm: FakeLLM
) -> None:
    # The second request's body stops short; the hub reads it only once the first is
    # answered, so the first answer comes whole, and then the connection is cut.
    url, _ = hub
    llm.script(slow_reply())
    host, port = url.removeprefix("http://").split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=BOUND) as sock:
        sock.sendall(send_message("First?") + send_message("Second?")[:-5])
        while chunk := sock.recv(65_536):
            received += chunk
    [reply] = _parsed(received, 1)
    assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
