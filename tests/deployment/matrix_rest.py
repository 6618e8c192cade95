"""The matrix's REST conversation cells: regenerate and continue (A2A tasks of the persona,
blocking or as server-sent events), canceled and followed with the a2a-sdk client by the
task's id, and the conversation listing, through httpx."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import httpx
from a2a.types.a2a_pb2 import CancelTaskRequest, SubscribeToTaskRequest, TaskState

from tests.deployment.matrix import DOORS, Cell
from tests.deployment.matrix_a2a import SPEAKERS, A2AClients, state_of, terminal_events
from tests.deployment.matrix_hubs import FULL_KEY, LIMITED_KEY, Deployment
from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.integration.a2a_helpers import get_task

__all__ = ["run_rest_cell"]

WAIT = 60
BASE = "/api/v1/conversations"
FULL = {"X-API-Key": FULL_KEY}
SSE = {**FULL, "Accept": "text/event-stream"}
TERMINAL_EVENTS = ("answer", "error")


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The server-sent events of a response, as (name, data)."""
    name = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, json.loads(line.removeprefix("data: "))


class Rest:
    """One REST cell: its conversation (one exchange, made over A2A JSON-RPC), its HTTP
    client and the model."""

    def __init__(
        self, deployment: Deployment, cell: Cell, http: httpx.AsyncClient, llm: FakeLLM
    ) -> None:
        self.deployment = deployment
        self.cell = cell
        self.http = http
        self.llm = llm
        self.context_id = str(uuid.uuid4())
        # The task the REST routes start is an A2A task: followed and canceled over JSON-RPC.
        self.a2a = A2AClients(deployment, replace(cell, door=DOORS[0]), http)

    def url(self, base: str, action: str = "") -> str:
        path = f"{base}{BASE}/{self.cell.persona_id}/{self.context_id}"
        return f"{path}/{action}" if action else path

    async def converse(self) -> None:
        """The conversation's first exchange, over A2A (a blocking SendMessage)."""
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "contextId": self.context_id,
            "parts": [{"text": "Hello, matrix"}],
        }
        answer = await self.http.post(
            f"{self.deployment.here()}/a2a/{self.cell.persona_id}/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": message},
            },
            headers={**FULL, "A2A-Version": "1.0"},
        )
        state = answer.json()["result"]["task"]["status"]["state"]
        assert state == "TASK_STATE_COMPLETED", answer.text

    async def send(self) -> None:
        answer = await self.http.post(
            self.url(self.deployment.here(), "regenerate"), json={}, headers=FULL
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["state"] == "completed", body
        for who in SPEAKERS[self.cell.target]:
            assert f"Answer from {who}." in body["answer"], body
        task = await get_task(await self.a2a.at(self.deployment.there()), body["task_id"])
        assert task.status.state == TaskState.TASK_STATE_COMPLETED

    async def stream(self) -> None:
        async with self.http.stream(
            "POST", self.url(self.deployment.here(), "continue"), json={}, headers=SSE
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            seen = [event async for event in events(response)]
        names = [name for name, _ in seen]
        assert names[0] == "task", names
        assert [n for n in names if n in TERMINAL_EVENTS] == ["answer"], names
        assert names[-1] == "answer", names
        assert seen[-1][1]["state"] == "completed", seen[-1]

    async def cancel(self, where: str) -> None:
        words = [f"w{i} " for i in range(200)]
        self.llm.script(Reply("".join(words), chunks=words, token_delay=0.05))
        there = self.deployment.there() if where == "other" else self.deployment.here()
        control = await self.a2a.at(there)
        async with self.http.stream(
            "POST", self.url(self.deployment.here(), "regenerate"), json={}, headers=SSE
        ) as response:
            assert response.status_code == 200
            stream = events(response)
            seen = [await anext(stream), await anext(stream)]
            assert [name for name, _ in seen] == ["task", "text"], seen
            task_id = seen[0][1]["task_id"]
            canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            seen += [event async for event in stream]
        ended = [(name, data) for name, data in seen if name in TERMINAL_EVENTS]
        assert len(ended) == 1, seen[-3:]
        name, data = ended[0]
        assert (name, data["status"], data["state"]) == ("error", 409, "canceled"), data
        task = await get_task(control, task_id)
        assert task.status.state == TaskState.TASK_STATE_CANCELED

    async def resubscribe(self) -> None:
        words = [f"w{i} " for i in range(8)]
        self.llm.script(Reply("".join(words), chunks=words, token_delay=0.05))
        follower = await self.a2a.at(self.deployment.there(), streaming=True)
        async with self.http.stream(
            "POST", self.url(self.deployment.here(), "regenerate"), json={}, headers=SSE
        ) as response:
            stream = events(response)
            name, data = await anext(stream)
            assert name == "task", (name, data)
            followed = [
                e async for e in follower.subscribe(SubscribeToTaskRequest(id=data["task_id"]))
            ]
            rest = [event async for event in stream]
        assert followed[0].HasField("task"), followed[0]
        assert len(terminal_events(followed)) == 1, followed[-3:]
        assert state_of(followed[-1]) == TaskState.TASK_STATE_COMPLETED, followed[-1]
        assert rest[-1][0] == "answer", rest[-3:]
        assert rest[-1][1]["answer"] == "".join(words)

    async def listed(self) -> None:
        answer = await self.http.get(
            f"{self.deployment.there()}{BASE}",
            params={"persona_id": self.cell.persona_id},
            headers=FULL,
        )
        assert answer.status_code == 200, answer.text
        assert self.context_id in [item["context_id"] for item in answer.json()["items"]]

    async def refused(self) -> None:
        url = self.url(self.deployment.here(), "regenerate")
        for headers, status in (({"X-API-Key": LIMITED_KEY}, 403), ({}, 401)):
            answer = await self.http.post(url, json={}, headers=headers)
            assert answer.status_code == status, answer.text
            assert answer.json()["detail"], answer.text

    async def failing(self) -> None:
        self.llm.script(Fail(500))
        answer = await self.http.post(
            self.url(self.deployment.here(), "regenerate"), json={}, headers=FULL
        )
        assert answer.status_code == 502, answer.text
        detail = answer.json()["detail"]
        assert "500" in detail, detail
        assert "reference" in detail, detail


async def run_rest_cell(deployment: Deployment, cell: Cell, llm: FakeLLM) -> None:
    """Run one REST conversation cell, bounded."""
    async with httpx.AsyncClient(timeout=WAIT) as http:
        rest = Rest(deployment, cell, http, llm)
        try:
            async with asyncio.timeout(WAIT):
                await rest.converse()
                operations = {
                    "send": rest.send,
                    "stream": rest.stream,
                    "cancel-same": lambda: rest.cancel("same"),
                    "cancel-other": lambda: rest.cancel("other"),
                    "resubscribe": rest.resubscribe,
                    "list": rest.listed,
                    "refused": rest.refused,
                    "failing": rest.failing,
                }
                await operations[cell.operation]()
        finally:
            await rest.a2a.close()
