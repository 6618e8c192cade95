"""A flood of gRPC connections at the process's descriptor limit (issue 46): a real
``persona-agent serve`` with 256 file descriptors, and more raw connections to its gRPC port
than it has descriptors. Before the cap, the flood took every descriptor: ``/healthz`` on
the HTTP port failed and gRPC calls were UNAVAILABLE. Now the gRPC server holds half the
descriptors at most and closes every further connection as it is accepted: the HTTP port
serves a persona throughout, and gRPC serves again once the flood is gone."""

from __future__ import annotations

import resource
import select
import shutil
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

from persona_agent.api.grpc.grpc_server import connection_cap
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.personas import BUNDLED
from tests.servers.hub_process import hub_process_with

DESCRIPTORS = 256
"""The hub process's descriptor limit (its soft ``RLIMIT_NOFILE``)."""

FLOOD = 400
"""Connections the attacker opens: more than the hub has descriptors."""

BOUND = 60.0
"""Seconds the test waits for the hub at most (its own timeouts are an hour here)."""

HANDSHAKE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""The HTTP/2 preface and an empty SETTINGS frame: a connection that looks like a client's."""


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


SITECUSTOMIZE = """\
import os
import resource

_limit = os.environ.pop("GRPC_FLOOD_TEST_NOFILE", None)
if _limit:
    _, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(_limit), _hard))
"""
"""Imported by the hub's Python at start (its directory on PYTHONPATH, as
tests/security/test_crash_safety.py does): the hub process's soft descriptor limit, before
any of its code runs; this test process keeps its own."""


def flood(host: str, port: int, count: int) -> list[socket.socket]:
    connections = []
    for _ in range(count):
        sock = socket.create_connection((host, port), timeout=BOUND)
        sock.sendall(HANDSHAKE)
        sock.setblocking(False)
        connections.append(sock)
    return connections


def closed_by_the_hub(
    connections: list[socket.socket], expected: int, wait: float = BOUND
) -> set[socket.socket]:
    """The connections the hub closed, once ``expected`` of them are (or ``wait`` passed)."""
    closed: set[socket.socket] = set()
    deadline = time.monotonic() + wait
    while True:
        open_ = [c for c in connections if c not in closed]
        readable, _, _ = select.select(open_, [], [], 0.2) if open_ else ([], [], [])
        for sock in readable:
            try:
                while sock.recv(65536):
                    pass  # the hub's SETTINGS and ack
            except BlockingIOError:
                continue  # open, nothing more to read
            except OSError:
                pass  # reset
            closed.add(sock)
        if len(closed) >= expected or time.monotonic() > deadline:
            return closed


def request(text: str) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=f"m-{text}", parts=[Part(text=text)])
    return SendMessageRequest(message=message, tenant="socrates")


def test_a_flood_past_the_descriptor_limit_leaves_the_http_port_serving(
    tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM
) -> None:
    root = tmp_path_factory.mktemp("grpc-flood")
    shutil.copytree(BUNDLED, root / "personas")
    settings = {
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "unused",
        "GRPC_PORT": "0",
        "GRPC_HANDSHAKE_TIMEOUT": "3600",
        "GRPC_IDLE_TIMEOUT": "3600",
    }
    hooks = root / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    environ = {"PYTHONPATH": str(hooks), "GRPC_FLOOD_TEST_NOFILE": str(DESCRIPTORS)}
    with ExitStack() as stack:
        hub = hub_process_with(root / "personas", root / "data", environ, **settings)
        url, process = stack.enter_context(hub)
        assert resource.prlimit(process.pid, resource.RLIMIT_NOFILE)[0] == DESCRIPTORS
        http = stack.enter_context(httpx.Client(base_url=url, timeout=BOUND))
        card = http.get("/a2a/socrates/.well-known/agent-card.json").json()
        (address,) = [
            i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"
        ]
        host, _, port = address.rpartition(":")

        connections = flood(host, int(port), FLOOD)
        for sock in connections:
            stack.callback(sock.close)
        held = connection_cap(1000, DESCRIPTORS)  # the default cap, halved to 128
        closed = closed_by_the_hub(connections, FLOOD - held)
        assert len(closed) == FLOOD - held

        # The flood holds every connection the gRPC server takes: the HTTP port serves.
        assert http.get("/healthz").status_code == 200
        llm.script(Reply("Still here."))
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
            },
        }
        answer = http.post("/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"}).json()
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
        with grpc.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            with pytest.raises(grpc.RpcError) as full:
                stub.SendMessage(request("full"), timeout=BOUND)
        assert full.value.code() == grpc.StatusCode.UNAVAILABLE
        # The connections it holds are still open, closed by nothing but their client.
        assert closed_by_the_hub([c for c in connections if c not in closed], 1, wait=0) == set()

        # The flood is gone: gRPC serves again (the hub frees each slot as it sees it close).
        for sock in connections:
            sock.close()
        llm.script(Reply("Back."))
        deadline = time.monotonic() + BOUND
        while True:
            with grpc.insecure_channel(address) as channel:
                stub = a2a_pb2_grpc.A2AServiceStub(channel)
                try:
                    served = stub.SendMessage(
                        request("back"),
                        metadata=[("a2a-version", "1.0")],
                        timeout=BOUND,
                    )
                    break
                except grpc.RpcError as error:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"gRPC never served again: {error}") from None
                    time.sleep(0.2)
        assert served.task.status.state == TaskState.TASK_STATE_COMPLETED
