"""The matrix's A2A cells with the a2a-sdk 1.x client, on each binding and protocol version:
each operation of :data:`tests.deployment.matrix.OPERATIONS` asserted in the client's terms."""

from __future__ import annotations

import asyncio
import uuid

import grpc.aio
import httpx
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.errors import A2AClientError
from a2a.client.interceptors import AfterArgs, BeforeArgs, ClientCallInterceptor
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

from tests.deployment.matrix import TARGETS, Cell
from tests.deployment.matrix_hubs import FULL_KEY, LIMITED_KEY, Deployment
from tests.integration.a2a_helpers import (
    TERMINAL,
    answer_text,
    get_task,
    send,
    status_text,
    submit,
    user_message,
)

__all__ = ["SPEAKERS", "KeyInterceptor", "run_a2a_cell", "state_of", "terminal_events"]

WAIT = 60
SPEAKERS = {
    "persona": ["Socrates"],
    "panel": ["Albert Einstein", "Marie Curie", "Charles Darwin"],
}
"""Whose answers each target's answer holds (the model says who answered)."""


def state_of(event: StreamResponse) -> TaskState | None:
    if event.HasField("task"):
        return event.task.status.state
    if event.HasField("status_update"):
        return event.status_update.status.state
    return None


def terminal_events(events: list[StreamResponse]) -> list[StreamResponse]:
    return [e for e in events if state_of(e) in TERMINAL]


class A2AClients:
    """a2a-sdk clients of one cell's target, at one base URL each (the card's URLs pointed
    at it), with a key (or none)."""

    def __init__(self, deployment: Deployment, cell: Cell, http: httpx.AsyncClient) -> None:
        self.deployment = deployment
        self.cell = cell
        self.http = http
        self.opened: list[httpx.AsyncClient] = []
        self.clients: list[Client] = []

    async def at(self, base: str, *, streaming: bool = False, key: str = FULL_KEY) -> Client:
        binding, version = self.cell.door.binding
        answer = await self.http.get(
            f"{base}/a2a/{self.cell.persona_id}/.well-known/agent-card.json",
            headers={"X-API-Key": FULL_KEY},
        )
        answer.raise_for_status()
        card = parse_agent_card(answer.json())
        chosen = [
            i
            for i in card.supported_interfaces
            if i.protocol_binding == binding and i.protocol_version == version
        ]
        assert chosen, f"the card offers no {binding} {version}: {card.supported_interfaces}"
        interface = chosen[0]
        if binding == "GRPC":
            interface.url = self.deployment.grpc_of(base)
        else:
            interface.url = interface.url.replace(self.deployment.public, base)
        del card.supported_interfaces[:]
        card.supported_interfaces.append(interface)
        headers = {"X-API-Key": key} if key else {}
        http = httpx.AsyncClient(timeout=WAIT, headers=headers)
        self.opened.append(http)
        config = ClientConfig(
            httpx_client=http,
            grpc_channel_factory=grpc.aio.insecure_channel,
            supported_protocol_bindings=[binding],
            streaming=streaming,
        )
        client = ClientFactory(config).create(
            card, interceptors=[KeyInterceptor(key)] if key else None
        )
        self.clients.append(client)
        return client

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
        for http in self.opened:
            await http.aclose()


class KeyInterceptor(ClientCallInterceptor):
    """Every call with the key as the ``x-api-key`` service parameter (an HTTP header, or
    gRPC metadata)."""

    def __init__(self, key: str) -> None:
        self.key = key

    async def before(self, args: BeforeArgs) -> None:
        context = args.context or ClientCallContext()
        context.service_parameters = {**(context.service_parameters or {}), "x-api-key": self.key}
        args.context = context

    async def after(self, args: AfterArgs) -> None:
        return None


def _assert_answer(cell: Cell, text: str) -> None:
    for who in SPEAKERS[cell.target]:
        assert f"Answer from {who}." in text, (cell.id, text)


async def _send(clients: A2AClients, cell: Cell) -> None:
    task = await send(await clients.at(clients.deployment.here()), "Hello, matrix")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
    _assert_answer(cell, answer_text(task))


async def _stream(clients: A2AClients, cell: Cell) -> None:
    client = await clients.at(clients.deployment.here(), streaming=True)
    events = [e async for e in client.send_message(user_message("Stream, matrix"))]
    text = "".join(
        p.text
        for e in events
        if e.HasField("artifact_update")
        for p in e.artifact_update.artifact.parts
    )
    _assert_answer(cell, text)
    assert len(terminal_events(events)) == 1, events[-3:]
    assert state_of(events[-1]) == TaskState.TASK_STATE_COMPLETED, events[-1]


async def _cancel(clients: A2AClients, cell: Cell, where: str) -> None:
    deployment = clients.deployment
    streaming = await clients.at(deployment.here(), streaming=True)
    control = await clients.at(deployment.there() if where == "other" else deployment.here())
    events: list[StreamResponse] = []
    canceled: Task | None = None
    async for event in streaming.send_message(user_message("[slow] Talk, matrix")):
        events.append(event)
        if event.HasField("artifact_update") and canceled is None:
            task_id = event.artifact_update.task_id
            canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED, canceled
    assert canceled is not None, "no answer was streamed before the end"
    assert len(terminal_events(events)) == 1, events[-3:]
    assert state_of(events[-1]) == TaskState.TASK_STATE_CANCELED, events[-1]
    if cell.door.binding[1] == "0.3":  # 0.3 ends a stream with a final status-update
        assert events[-1].HasField("status_update"), events[-2:]
    stored = await get_task(control, canceled.id)
    assert stored.status.state == TaskState.TASK_STATE_CANCELED


async def _resubscribe(clients: A2AClients, cell: Cell) -> None:
    deployment = clients.deployment
    task_id = await submit(await clients.at(deployment.here()), "[brief] Go on, matrix")
    follower = await clients.at(deployment.there(), streaming=True)
    events = [e async for e in follower.subscribe(SubscribeToTaskRequest(id=task_id))]
    assert events[0].HasField("task"), events[0]
    assert events[0].task.id == task_id
    assert len(terminal_events(events)) == 1, events[-3:]
    assert state_of(events[-1]) == TaskState.TASK_STATE_COMPLETED, events[-1]
    done = await get_task(follower, task_id)
    for who in SPEAKERS[cell.target]:
        assert f"{who}-w7" in answer_text(done), answer_text(done)


async def _list(clients: A2AClients, cell: Cell) -> None:
    deployment = clients.deployment
    context_id = str(uuid.uuid4())
    task = await send(await clients.at(deployment.here()), "Listed, matrix", context_id)
    other = await clients.at(deployment.there())
    listed = await other.list_tasks(ListTasksRequest(context_id=context_id))
    assert [t.id for t in listed.tasks] == [task.id], listed
    assert listed.tasks[0].context_id == context_id


async def _refused(clients: A2AClients, cell: Cell) -> None:
    """A key for another persona: 403 (gRPC PERMISSION_DENIED); no key: 401
    (UNAUTHENTICATED); and the model is never asked."""
    base = clients.deployment.here()
    refusals = ((LIMITED_KEY, ("403", "PERMISSION_DENIED")), ("", ("401", "UNAUTHENTICATED")))
    for key, expected in refusals:
        client = await clients.at(base, key=key)
        try:
            await send(client, "Let me in")
        except (A2AClientError, A2AError, grpc.aio.AioRpcError) as error:
            said = f"{type(error).__name__}: {error}"
            assert any(code in said for code in expected), said
        else:
            raise AssertionError(f"{cell.id}: served with key {key!r}")


async def _failing(clients: A2AClients, cell: Cell) -> None:
    task = await send(await clients.at(clients.deployment.here()), "[fail] Hello?")
    assert task.status.state == TaskState.TASK_STATE_FAILED, task.status
    said = status_text(task)
    assert "500" in said or "did not answer" in said, said
    assert "Traceback" not in said


async def run_a2a_cell(deployment: Deployment, cell: Cell) -> None:
    """Run one a2a-sdk 1.x cell, bounded."""
    assert cell.persona_id in TARGETS.values()
    operations = {
        "send": _send,
        "stream": _stream,
        "cancel-same": lambda c, x: _cancel(c, x, "same"),
        "cancel-other": lambda c, x: _cancel(c, x, "other"),
        "resubscribe": _resubscribe,
        "list": _list,
        "refused": _refused,
        "failing": _failing,
    }
    async with httpx.AsyncClient(timeout=WAIT) as http:
        clients = A2AClients(deployment, cell, http)
        try:
            async with asyncio.timeout(WAIT):
                await operations[cell.operation](clients, cell)
        finally:
            await clients.close()
