"""A2A over gRPC through nginx (issue 48): two replicas behind ``deploy/nginx.conf``'s gRPC
server, the a2a-sdk 1.x client built from a card as a user's is (the card's gRPC address
is nginx's, PERSONA_AGENT_GRPC_PUBLIC_ADDRESS), and nginx's access log telling which
replica answered each call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc.aio
import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)

from tests.deployment.matrix_a2a import SPEAKERS, KeyInterceptor, state_of, terminal_events
from tests.deployment.matrix_hubs import FULL_KEY, Deployment, deployment, matrix_answer
from tests.fakes.fake_llm import FakeLLM
from tests.integration.a2a_helpers import answer_text, get_task, send, submit, user_message
from tests.servers.replicas import Nginx

WAIT = 60
SERVICE = "/lf.a2a.v1.A2AService"


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("grpc-nginx")
    with FakeLLM(default=matrix_answer) as llm, deployment("two-replicas", root, llm) as running:
        yield running


def _proxy(replicas: Deployment) -> Nginx:
    assert replicas.proxy is not None
    return replicas.proxy


async def _client(replicas: Deployment, http: httpx.AsyncClient, *, streaming: bool) -> Client:
    """The a2a-sdk client a user builds from Socrates's card, fetched through nginx,
    choosing gRPC: it calls the address the card names."""
    answer = await http.get(
        f"{replicas.public}/a2a/socrates/.well-known/agent-card.json",
        headers={"X-API-Key": FULL_KEY},
    )
    answer.raise_for_status()
    card = parse_agent_card(answer.json())
    config = ClientConfig(
        httpx_client=http,
        grpc_channel_factory=grpc.aio.insecure_channel,
        supported_protocol_bindings=["GRPC"],
        streaming=streaming,
    )
    return ClientFactory(config).create(card, interceptors=[KeyInterceptor(FULL_KEY)])


def _calls(front: Nginx, method: str, count: int) -> list[str]:
    """The replicas (``upstream=``) of the first ``count`` gRPC calls of ``method`` in
    nginx's access log, once it holds them (nginx writes a line as a call ends)."""
    deadline = time.monotonic() + WAIT
    while len(found := front.upstreams(f"{SERVICE}/{method}")) < count:
        assert time.monotonic() < deadline, (method, count, front.access_log())
        time.sleep(0.05)
    return found[:count]


def test_the_cards_send_grpc_clients_to_nginx(replicas: Deployment) -> None:
    answer = httpx.get(
        f"{replicas.public}/a2a/socrates/.well-known/agent-card.json",
        headers={"X-API-Key": FULL_KEY},
    )
    card = parse_agent_card(answer.json())
    grpc_urls = [i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
    assert grpc_urls == [_proxy(replicas).grpc], card.supported_interfaces
    assert replicas.grpc_public == _proxy(replicas).grpc
    assert _proxy(replicas).grpc not in replicas.grpc


def test_send_and_stream_through_nginx_reach_both_replicas(replicas: Deployment) -> None:
    async def scenario() -> list[StreamResponse]:
        async with httpx.AsyncClient(timeout=WAIT) as http, asyncio.timeout(WAIT):
            blocking = await _client(replicas, http, streaming=False)
            streaming = await _client(replicas, http, streaming=True)
            for _ in range(2):
                task = await send(blocking, "Hello through nginx")
                assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
                assert "Answer from Socrates." in answer_text(task)
            events = [e async for e in streaming.send_message(user_message("Stream, nginx"))]
            await blocking.close()
            await streaming.close()
            return events

    events = asyncio.run(scenario())
    assert len(terminal_events(events)) == 1, events[-3:]
    assert state_of(events[-1]) == TaskState.TASK_STATE_COMPLETED, events[-1]
    sent = _calls(_proxy(replicas), "SendMessage", 2)
    assert sorted(sent) == sorted(replicas.grpc), sent  # one call on each replica
    assert _calls(_proxy(replicas), "SendStreamingMessage", 1)[0] in replicas.grpc


def test_a_stream_canceled_through_nginx_by_the_other_replica(replicas: Deployment) -> None:
    """The stream runs on one replica and the cancel, the next call, reaches the other
    (round-robin); the stream ends with one terminal event, canceled."""

    async def scenario() -> tuple[str, list[StreamResponse]]:
        async with httpx.AsyncClient(timeout=WAIT) as http, asyncio.timeout(WAIT):
            streaming = await _client(replicas, http, streaming=True)
            control = await _client(replicas, http, streaming=False)
            events: list[StreamResponse] = []
            task_id = ""
            async for event in streaming.send_message(user_message("[slow] Talk, nginx")):
                events.append(event)
                if event.HasField("artifact_update") and not task_id:
                    task_id = event.artifact_update.task_id
                    canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
                    assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled
            stored = await get_task(control, task_id)
            assert stored.status.state == TaskState.TASK_STATE_CANCELED
            await streaming.close()
            await control.close()
            return task_id, events

    front = _proxy(replicas)
    streams_before = len(front.upstreams(f"{SERVICE}/SendStreamingMessage"))
    task_id, events = asyncio.run(scenario())
    assert task_id, "no answer was streamed before the end"
    assert len(terminal_events(events)) == 1, events[-3:]
    assert state_of(events[-1]) == TaskState.TASK_STATE_CANCELED, events[-1]
    stream_on = _calls(front, "SendStreamingMessage", streams_before + 1)[-1]
    cancel_on = _calls(front, "CancelTask", 1)[0]
    assert {stream_on, cancel_on} == set(replicas.grpc), (stream_on, cancel_on)


def test_a_task_followed_through_nginx_from_the_other_replica(replicas: Deployment) -> None:
    """Submitted on one replica, followed (SubscribeToTask, the next call) on the other,
    to its one terminal event."""

    async def scenario() -> tuple[str, list[StreamResponse], str]:
        async with httpx.AsyncClient(timeout=WAIT) as http, asyncio.timeout(WAIT):
            blocking = await _client(replicas, http, streaming=False)
            follower = await _client(replicas, http, streaming=True)
            task_id = await submit(blocking, "[brief] Go on, nginx")
            request = SubscribeToTaskRequest(id=task_id)
            events = [e async for e in follower.subscribe(request)]
            done = await get_task(blocking, task_id)
            await blocking.close()
            await follower.close()
            return task_id, events, answer_text(done)

    front = _proxy(replicas)
    sends_before = len(front.upstreams(f"{SERVICE}/SendMessage"))
    task_id, events, text = asyncio.run(scenario())
    assert events[0].HasField("task"), events[0]
    assert events[0].task.id == task_id
    assert len(terminal_events(events)) == 1, events[-3:]
    assert state_of(events[-1]) == TaskState.TASK_STATE_COMPLETED, events[-1]
    assert f"{SPEAKERS['persona'][0]}-w7" in text, text
    submitted_on = _calls(front, "SendMessage", sends_before + 1)[-1]
    followed_on = _calls(front, "SubscribeToTask", 1)[0]
    assert {submitted_on, followed_on} == set(replicas.grpc), (submitted_on, followed_on)
