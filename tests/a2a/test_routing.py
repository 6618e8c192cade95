"""PersonaRequestHandler: the subscription seam (the snapshot, then each later event
once), and who may list tasks without naming a context.

The SDK taps a running task's events, then reads the task: an event applied in
between is both in the snapshot and on the tap. The race is rare on a real hub
(the conformance suite subscribes many times), so the seam is played here by a
stand-in for the SDK's handler that yields exactly such a sequence.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.types.a2a_pb2 import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Part,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidParamsError

from persona_agent.a2a.context_keys import PARTS_METADATA_KEY, PERSONA_STATE_KEY
from persona_agent.a2a.forwarding import PersonaRequestHandler
from persona_agent.personas.model import Persona
from tests.a2a.test_task_store import NamedUser
from tests.integration.conftest import HERMIT


def chunk(text: str, parts: int) -> TaskArtifactUpdateEvent:
    event = TaskArtifactUpdateEvent(
        task_id="t",
        context_id="c",
        artifact=Artifact(artifact_id="a", parts=[Part(text=text)]),
        append=parts > 1,
    )
    event.metadata.update({PARTS_METADATA_KEY: parts})
    return event


def status(state: TaskState, seconds: int) -> TaskStatusUpdateEvent:
    event = TaskStatusUpdateEvent(task_id="t", context_id="c", status=TaskStatus(state=state))
    event.status.timestamp.FromSeconds(seconds)
    return event


class SdkStandIn:
    """Yields what the SDK's on_subscribe_to_task yields: the task, then the tap."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events

    async def on_subscribe_to_task(
        self, _params: SubscribeToTaskRequest, _context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        for event in self.events:
            yield event


class App:
    def __init__(self, handler: SdkStandIn) -> None:
        self.handler = handler
        self.persona = Persona.from_data("p", HERMIT)


async def subscribe(events: list[Event]) -> list[Event]:
    app = App(SdkStandIn(events))
    handler = PersonaRequestHandler(lambda _persona, _task: app)  # type: ignore[arg-type,return-value]
    context = ServerCallContext(state={PERSONA_STATE_KEY: "p"})
    return [e async for e in handler.on_subscribe_to_task(SubscribeToTaskRequest(id="t"), context)]


def snapshot(texts: list[str], working_at: int) -> Task:
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    task.status.timestamp.FromSeconds(working_at)
    task.artifacts.append(Artifact(artifact_id="a", parts=[Part(text=t) for t in texts]))
    return task


def texts(events: list[Event]) -> list[str]:
    return [
        p.text for e in events if isinstance(e, TaskArtifactUpdateEvent) for p in e.artifact.parts
    ]


async def test_events_the_snapshot_holds_are_not_sent_again() -> None:
    working = status(TaskState.TASK_STATE_WORKING, 10)
    events = await subscribe(
        [
            snapshot(["one", " two", " two"], working_at=10),
            working,  # applied before the snapshot was read
            chunk(" two", 2),  # likewise: the snapshot has 3 parts
            chunk(" two", 3),
            chunk(" two", 4),  # new, although its text is the same
            chunk(" three", 5),
            status(TaskState.TASK_STATE_COMPLETED, 12),
        ]
    )
    assert isinstance(events[0], Task)
    assert texts(events) == [" two", " three"]
    assert [e.status.state for e in events if isinstance(e, TaskStatusUpdateEvent)] == [
        TaskState.TASK_STATE_COMPLETED
    ]


async def test_once_past_the_seam_every_event_is_sent() -> None:
    events = await subscribe(
        [
            snapshot(["one"], working_at=10),
            chunk(" two", 2),  # new: the seam is passed
            status(TaskState.TASK_STATE_WORKING, 10),  # an equal status after it is sent
            chunk(" three", 3),
        ]
    )
    assert texts(events) == [" two", " three"]
    assert len(events) == 4


async def test_the_snapshot_sent_is_the_task_as_it_was_then() -> None:
    task = snapshot(["one"], working_at=10)
    events = await subscribe([task, chunk(" two", 2)])
    task.artifacts[0].parts.append(Part(text=" two"))  # the SDK's object goes on changing
    first = events[0]
    assert isinstance(first, Task)
    assert [p.text for p in first.artifacts[0].parts] == ["one"]


class ListingStandIn:
    """Answers ListTasks as the SDK's handler would, recording each call it gets."""

    def __init__(self) -> None:
        self.calls: list[ListTasksRequest] = []

    async def on_list_tasks(
        self, params: ListTasksRequest, _context: ServerCallContext
    ) -> ListTasksResponse:
        self.calls.append(params)
        return ListTasksResponse()


@pytest.mark.parametrize(
    ("user", "forwarded"),
    [
        (None, False),  # anonymous: a contextId is the only proof of owning tasks
        (NamedUser(""), False),  # no name: its tasks would be every nameless caller's
        (NamedUser("ada"), True),  # the store keeps ada's tasks apart from everyone's
    ],
)
async def test_without_a_context_id_only_a_named_user_lists_tasks(
    user: User | None, forwarded: bool
) -> None:
    sdk = ListingStandIn()
    app = App(sdk)  # type: ignore[arg-type]
    handler = PersonaRequestHandler(lambda _persona, _task: app)  # type: ignore[arg-type,return-value]
    state = {PERSONA_STATE_KEY: "p"}
    context = (
        ServerCallContext(state=state)
        if user is None
        else ServerCallContext(state=state, user=user)
    )
    if forwarded:
        await handler.on_list_tasks(ListTasksRequest(), context)
        assert len(sdk.calls) == 1
    else:
        with pytest.raises(InvalidParamsError, match="needs a contextId"):
            await handler.on_list_tasks(ListTasksRequest(), context)
        assert sdk.calls == []
    await handler.on_list_tasks(ListTasksRequest(context_id="c"), context)
    assert sdk.calls[-1].context_id == "c"
