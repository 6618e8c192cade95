"""The replica harness itself (tests/servers/replicas.py): two ``persona-agent serve``
processes on one fresh PostgreSQL database, behind nginx running ``deploy/nginx.conf``.

What replicas share is tested elsewhere (tests/integration/test_replicas.py); here, only
that the harness gives what it promises: nginx answers, spreads requests round-robin,
steps around a dead replica, carries an A2A message to a completed task and streams
events as they come.
"""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import StreamResponse, Task, TaskState

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send, user_message
from tests.servers.replicas import (
    NGINX_CONF,
    Nginx,
    Replica,
    ReplicaSet,
    render_nginx_conf,
    replica_set,
)

_T = TypeVar("_T")

ANSWER = "Greetings from behind nginx."


def _eventually(probe: Callable[[], _T | None], what: str, timeout: float = 60.0) -> _T:
    """``probe()`` once it is not ``None`` (log lines are written just after the answer);
    ``timeout`` is a safety bound against a hang, not a timing."""
    deadline = time.monotonic() + timeout
    while (found := probe()) is None:
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.02)
    return found


def _served(replica: Replica, paths: list[str]) -> list[str]:
    """The ``paths`` the replica's own access log shows (uvicorn's access lines)."""
    output = replica.output()
    return [path for path in paths if f'"GET {path} HTTP/1.1" 200' in output]


def _served_exactly(replica: Replica, paths: list[str], expected: list[str]) -> list[str] | None:
    served = _served(replica, paths)
    return served if served == expected else None


def _logged(proxy: Nginx, path: str) -> list[str] | None:
    """The upstreams nginx logged for ``path``, once it has."""
    return proxy.upstreams(path) or None


async def _client(front: str, persona_id: str, http: httpx.AsyncClient, streaming: bool) -> Client:
    """The a2a-sdk client of the persona's card fetched through nginx, on the card's
    JSON-RPC 1.0 interface (which must be nginx's URL too)."""
    response = await http.get(f"{front}/a2a/{persona_id}/.well-known/agent-card.json")
    response.raise_for_status()
    card = parse_agent_card(response.json())
    chosen = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == "JSONRPC" and i.protocol_version == "1.0"
    ]
    assert chosen, card
    assert chosen[0].url == f"{front}/a2a/{persona_id}/", chosen[0].url
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(chosen)
    config = ClientConfig(
        httpx_client=http, supported_protocol_bindings=["JSONRPC"], streaming=streaming
    )
    return ClientFactory(config).create(card)


async def _send_through(front: str, persona_id: str, text: str) -> Task:
    async with httpx.AsyncClient(timeout=30) as http:
        return await send(await _client(front, persona_id, http, streaming=False), text)


async def _stream_through(
    front: str, persona_id: str, text: str, llm: FakeLLM, held: str
) -> list[StreamResponse]:
    """SendStreamingMessage through nginx, the model's answer held after its first words
    (``held``) until they have reached the client (then released): a proxy that buffers
    the stream keeps them, and the wait ends in AssertionError."""
    events: list[StreamResponse] = []
    try:
        async with httpx.AsyncClient(timeout=60) as http, asyncio.timeout(60):
            client = await _client(front, persona_id, http, streaming=True)
            async for event in client.send_message(user_message(text)):
                events.append(event)
                if _text(events) == held:
                    llm.release()
    except TimeoutError:
        raise AssertionError(f"{held!r} held back by nginx: {events}") from None
    return events


def _text(events: list[StreamResponse]) -> str:
    return "".join(
        part.text
        for event in events
        if event.HasField("artifact_update")
        for part in event.artifact_update.artifact.parts
    )


def _check_round_robin(replicas: ReplicaSet, http: httpx.Client) -> None:
    paths = [f"/healthz?n={n}" for n in range(6)]
    for path in paths:
        assert http.get(path).status_code == 200

    # nginx's access log names the replica of each request: they take turns.
    upstreams = [
        _eventually(functools.partial(_logged, replicas.proxy, path), f"{path} logged")
        for path in paths
    ]
    turns = [lines[0] for lines in upstreams]
    first, second = (f"127.0.0.1:{port}" for port in replicas.ports)
    assert turns in ([first, second] * 3, [second, first] * 3), replicas.proxy.access_log()

    # And each replica's own log shows the requests nginx says it sent there.
    for replica in replicas.replicas:
        address = f"127.0.0.1:{replica.port}"
        mine = [path for path, turn in zip(paths, turns, strict=True) if turn == address]
        seen = _eventually(
            functools.partial(_served_exactly, replica, paths, mine),
            f"the replica on port {replica.port} logs {mine}",
        )
        assert len(seen) == 3


def test_two_replicas_behind_nginx(tmp_path: Path, personas_dir: Path, llm: FakeLLM) -> None:
    llm.script(Reply(ANSWER))
    with (
        replica_set(
            2,
            personas_dir,
            tmp_path,
            LLM_BASE_URL=llm.base_url,
            LLM_API_KEY="test",
            LLM_MAX_RETRIES="0",
        ) as replicas,
        httpx.Client(base_url=replicas.front, timeout=10) as http,
    ):
        health = http.get("/healthz")
        assert health.status_code == 200, health.text
        assert health.json()["status"] == "ok"
        assert http.get("/readyz").status_code == 200

        _check_round_robin(replicas, http)

        task = asyncio.run(_send_through(replicas.front, "socrates", "Hello"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert answer_text(task) == ANSWER
        assert len(llm.requests) == 1

        # A stream's events pass nginx as the replica writes them (no buffering): the
        # answer's first words reach the client while the model still holds the rest.
        words = [f"w{i} " for i in range(10)]
        llm.script(Reply("".join(words), chunks=words, hold_after=5))
        held = "".join(words[:5])
        events = asyncio.run(_stream_through(replicas.front, "socrates", "Talk", llm, held))
        assert _text(events) == "".join(words)
        last = events[-1]
        assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED, last

        # A replica killed outright: nginx retries the refused connection on the other one,
        # and the client never sees it.
        dead, alive = replicas.replicas
        dead.kill()
        paths = [f"/healthz?after-kill={n}" for n in range(4)]
        for path in paths:
            response = http.get(path)
            assert response.status_code == 200, (response.text, replicas.proxy.error_log())
        tries = [
            _eventually(functools.partial(_logged, replicas.proxy, path), path)[0].split(", ")
            for path in paths
        ]
        # "dead, alive" when nginx tried the dead one first (once: then it rests), else "alive".
        assert all(tried[-1] == f"127.0.0.1:{alive.port}" for tried in tries), tries
        assert [f"127.0.0.1:{dead.port}", f"127.0.0.1:{alive.port}"] in tries, tries


def test_the_deployment_guide_shows_the_nginx_configuration_the_tests_run() -> None:
    guide = (NGINX_CONF.parents[1] / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert f"```nginx\n{NGINX_CONF.read_text(encoding='utf-8')}```\n" in guide


def test_the_configuration_rendered_on_the_tests_ports() -> None:
    """Each upstream's servers on its own ports, each listen on its own port; the gRPC
    upstream and listen stay as the file has them when not given."""
    text = NGINX_CONF.read_text(encoding="utf-8")
    both = render_nginx_conf(text, [9001, 9002], 9080, [9051, 9052], 9050)
    http, grpc = both.split("upstream persona_agent_grpc {")
    assert re.findall(r"server 127\.0\.0\.1:(\d+) ", http) == ["9001", "9002"]
    assert re.findall(r"server 127\.0\.0\.1:(\d+) ", grpc) == ["9051", "9052"]
    assert re.findall(r"listen (\d+)( http2)?;", both) == [("9080", ""), ("9050", " http2")]
    http_only = render_nginx_conf(text, [9001], 9080)
    assert "server 127.0.0.1:50053 max_fails=1" in http_only
    assert "listen 50050 http2;" in http_only
    assert re.findall(r"server 127\.0\.0\.1:(\d+) ", http_only.split("_grpc {")[0]) == ["9001"]
    with pytest.raises(ValueError, match="at least one upstream port"):
        render_nginx_conf(text, [9001], 9080, [], 9050)
