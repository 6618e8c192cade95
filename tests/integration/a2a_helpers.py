"""Small helpers for driving personas with the real a2a-sdk client."""

from __future__ import annotations

import asyncio
import uuid

from a2a.client import Client
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


def user_message(text: str, context_id: str | None = None) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(message=message)


async def send(client: Client, text: str, context_id: str | None = None) -> Task:
    """A blocking send: the one response is the task, already terminal."""
    responses = [r async for r in client.send_message(user_message(text, context_id))]
    assert len(responses) == 1, responses
    assert responses[0].HasField("task"), responses[0]
    return responses[0].task


async def submit(client: Client, text: str) -> str:
    """Send with ``returnImmediately``: the task id, while the task is still running."""
    request = user_message(text)
    request.configuration.return_immediately = True
    responses = [r async for r in client.send_message(request)]
    assert responses[0].HasField("task"), responses
    return responses[0].task.id


async def stream(client: Client, text: str, context_id: str | None = None) -> list[StreamResponse]:
    async with asyncio.timeout(30):
        return [r async for r in client.send_message(user_message(text, context_id))]


def answer_text(task: Task) -> str:
    """The text of the task's answer artifact."""
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


def status_text(task: Task) -> str:
    return "".join(part.text for part in task.status.message.parts if part.HasField("text"))


async def get_task(client: Client, task_id: str) -> Task:
    return await client.get_task(GetTaskRequest(id=task_id))


async def wait_for_state(client: Client, task_id: str, state: TaskState) -> Task:
    """Poll GetTask (the client's only view) until the task reaches ``state`` (60 s at most,
    a hang guard)."""
    async with asyncio.timeout(60):
        while True:
            task = await get_task(client, task_id)
            if task.status.state == state:
                return task
            await asyncio.sleep(0.05)
