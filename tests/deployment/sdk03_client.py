# mypy: ignore-errors
"""The a2a-sdk 0.3 client's view of the matrix's cells, run in its own environment.

Not imported by the tests (their environment has a2a-sdk 1.x): tests/deployment/matrix_sdk03.py
runs it with the 0.3 environment's Python, the job as JSON on standard input::

    {"here": URL, "there": URL, "public": URL, "target": "socrates", "binding": "JSONRPC",
     "key": KEY, "limited_key": KEY, "operations": ["send", "stream", ...]}

and reads, on standard output, one JSON object: for each operation what the client saw
(``events``: ``task``, ``status-update:STATE[:final]``, ``artifact-update``; ``state``; the
status ``text``; ``error``: the exception the client raised, as ``Type: message``).
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    Message,
    MessageSendConfiguration,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    TextPart,
)

WAIT = 60


def message(text):
    return Message(
        role=Role.user, message_id=str(uuid.uuid4()), parts=[Part(root=TextPart(text=text))]
    )


def kind(event):
    if isinstance(event, Message):
        return "message"
    _task, update = event
    if update is None:
        return "task"
    if isinstance(update, TaskStatusUpdateEvent):
        final = ":final" if update.final else ""
        return f"status-update:{update.status.state.value}{final}"
    if isinstance(update, TaskArtifactUpdateEvent):
        return "artifact-update"
    return type(update).__name__


def status_text(task):
    parts = task.status.message.parts if task.status.message else []
    return "".join(getattr(p.root, "text", "") for p in parts)


def answer_text(task):
    return "".join(getattr(p.root, "text", "") for a in task.artifacts or [] for p in a.parts)


def error_of(error):
    return f"{type(error).__name__}: {error}"


class Cells:
    def __init__(self, job, http):
        self.job = job
        self.http = http
        self.cards = {}

    async def client(self, base, *, streaming, key=None):
        target = self.job["target"]
        if base not in self.cards:
            url = f"{base}/a2a/{target}/.well-known/agent-card.json"
            answer = await self.http.get(url)
            answer.raise_for_status()
            text = answer.text.replace(self.job["public"], base)
            self.cards[base] = AgentCard.model_validate_json(text)
        headers = {} if key == "" else {"X-API-Key": key or self.job["key"]}
        http = httpx.AsyncClient(timeout=WAIT, headers=headers)
        config = ClientConfig(
            httpx_client=http, supported_transports=[self.job["binding"]], streaming=streaming
        )
        return ClientFactory(config).create(self.cards[base])

    async def send(self):
        client = await self.client(self.job["here"], streaming=False)
        events = [e async for e in client.send_message(message("Hello from 0.3"))]
        task = events[-1][0]
        return {
            "events": [kind(e) for e in events],
            "state": task.status.state.value,
            "answer": answer_text(task),
        }

    async def stream(self):
        client = await self.client(self.job["here"], streaming=True)
        seen = {"events": []}
        try:
            async for event in client.send_message(message("Stream, 0.3")):
                seen["events"].append(kind(event))
                seen["answer"] = answer_text(event[0])
                seen["state"] = event[0].status.state.value
        except Exception as error:
            seen["error"] = error_of(error)
        return seen

    async def cancel(self, where):
        client = await self.client(self.job["here"], streaming=True)
        other = await self.client(self.job[where], streaming=False)
        seen = {"events": []}
        try:
            async for event in client.send_message(message("[slow] Talk, 0.3")):
                seen["events"].append(kind(event))
                if seen["events"][-1] == "artifact-update" and "canceled" not in seen:
                    canceled = await other.cancel_task(TaskIdParams(id=event[0].id))
                    seen["canceled"] = canceled.status.state.value
                    seen["task_id"] = event[0].id
        except Exception as error:
            seen["error"] = error_of(error)
        if "task_id" in seen:
            task = await other.get_task(TaskQueryParams(id=seen["task_id"]))
            seen["state"] = task.status.state.value
        return seen

    async def resubscribe(self):
        client = await self.client(self.job["here"], streaming=False)
        started = [
            e
            async for e in client.send_message(
                message("[brief] Go on, 0.3"),
                configuration=MessageSendConfiguration(blocking=False),
            )
        ]
        task_id = started[-1][0].id
        follower = await self.client(self.job["there"], streaming=True)
        seen = {"events": []}
        try:
            async for event in follower.resubscribe(TaskIdParams(id=task_id)):
                seen["events"].append(kind(event))
                seen["state"] = event[0].status.state.value
        except Exception as error:
            seen["error"] = error_of(error)
        return seen

    async def refused(self):
        seen = {}
        for name, key in (("limited", self.job["limited_key"]), ("none", "")):
            client = await self.client(self.job["here"], streaming=False, key=key)
            try:
                events = [e async for e in client.send_message(message("Let me in"))]
                seen[name] = f"served: {[kind(e) for e in events]}"
            except Exception as error:
                seen[name] = error_of(error)
        return seen

    async def failing(self):
        client = await self.client(self.job["here"], streaming=False)
        events = [e async for e in client.send_message(message("[fail] Hello?"))]
        task = events[-1][0]
        return {"state": task.status.state.value, "text": status_text(task)}


async def main():
    job = json.loads(sys.stdin.read())
    report = {}
    async with httpx.AsyncClient(timeout=WAIT, headers={"X-API-Key": job["key"]}) as http:
        cells = Cells(job, http)
        for operation in job["operations"]:
            run = {
                "send": cells.send,
                "stream": cells.stream,
                "cancel-same": lambda: cells.cancel("here"),
                "cancel-other": lambda: cells.cancel("there"),
                "resubscribe": cells.resubscribe,
                "refused": cells.refused,
                "failing": cells.failing,
            }[operation]
            try:
                async with asyncio.timeout(WAIT):
                    report[operation] = await run()
            except Exception as error:
                report[operation] = {"error": error_of(error)}
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main())
