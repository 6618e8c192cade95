"""A bounded soak: hundreds of mixed requests (``PERSONA_AGENT_TEST_SOAK``, 500 by
default), faults included, from concurrent clients.

Afterwards every task is terminal, every conversation's history is intact (turns
alternate and never mix contexts), every answer belongs to its question, and the hub
still answers normally.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from a2a.client import Client
from a2a.types.a2a_pb2 import CancelTaskRequest, ListTasksRequest, Task, TaskState
from a2a.utils.errors import A2AError

from tests.conformance.conftest import TERMINAL_STATES
from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, get_task, send, stream, submit
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory

REQUESTS = int(os.environ.get("PERSONA_AGENT_TEST_SOAK", "500"))
"""How many requests; README.md, Development: a longer soak is one setting away."""
WORKERS = 8
PERSONAS = ["socrates", "ada-lovelace", "marie-curie"]
OPERATIONS = {"send": 30, "stream": 10, "get": 33, "list": 10, "cancel": 8, "fault": 9}
DEFAULT_ANSWER = "Hello from the fake LLM. You said: "
TAG = re.compile(r"^\[(?P<context>[^\]]+)\] ")

FAULTS: list[Fail | Reply] = [
    Fail(500, "soak failure"),
    Fail(429, "soak limit", {"retry-after-ms": "5"}),
    Reply("broken answer here", break_after=1),
]


@dataclass
class Budget:
    """How many requests the workers may still make (shared; one event loop, no lock)."""

    left: int

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


@dataclass
class Worker:
    number: int
    hub: Hub
    llm: FakeLLM
    budget: Budget
    rng: random.Random = field(init=False)
    persona: str = field(init=False)
    transport: tuple[str, str] = field(init=False)
    context: str = field(default_factory=lambda: str(uuid.uuid4()))
    tasks: dict[str, str] = field(default_factory=dict)  # task id -> the question
    done: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.number)
        self.persona = PERSONAS[self.number % len(PERSONAS)]
        transport = TRANSPORTS[self.number % len(TRANSPORTS)].values[0]
        assert isinstance(transport, tuple)
        self.transport = transport

    async def run(self) -> None:
        client = await self.hub.client(self.persona, self.transport)
        streaming = await self.hub.client(self.persona, self.transport, streaming=True)
        turn = 0
        while self.budget.take():
            operation = self.rng.choices(list(OPERATIONS), weights=list(OPERATIONS.values()))[0]
            if operation == "list" and self.transport[1] != "1.0":
                operation = "get"
            if operation == "get" and not self.tasks:
                operation = "send"
            turn += 1
            question = f"[{self.context}] turn {turn}"
            if operation in ("send", "fault"):
                if operation == "fault":
                    self.llm.script(self.rng.choice(FAULTS))
                self.record(await send(client, question, self.context), question)
            elif operation == "stream":
                events = await stream(streaming, question, self.context)
                task_id = events[0].task.id
                assert events[-1].status_update.status.state in TERMINAL_STATES
                self.tasks[task_id] = question
            elif operation == "get":
                task_id = self.rng.choice(list(self.tasks))
                assert (await get_task(client, task_id)).id == task_id
            elif operation == "list":
                page = await client.list_tasks(ListTasksRequest(page_size=10))
                assert len(page.tasks) <= 10
            else:
                # A task of its own context, canceled at once (or already finished).
                task_id = await submit(client, f"[{uuid.uuid4()}] cancel me")
                with contextlib.suppress(A2AError):  # TaskNotCancelable: it finished first
                    await client.cancel_task(CancelTaskRequest(id=task_id))
                self.tasks[task_id] = ""
            self.done[operation] += 1

    def record(self, task: Task, question: str) -> None:
        assert task.status.state in TERMINAL_STATES
        self.tasks[task.id] = question


async def _all_tasks(client: Client) -> list[Task]:
    tasks: list[Task] = []
    token = ""
    while True:
        page = await client.list_tasks(ListTasksRequest(page_size=100, page_token=token))
        tasks.extend(page.tasks)
        token = page.next_page_token
        if not token:
            return tasks


async def test_soak(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(mcp_config=None, llm_timeout=60, llm_max_retries=1) as hub:
        budget = Budget(REQUESTS)
        workers = [Worker(i, hub, llm, budget) for i in range(WORKERS)]
        started = time.monotonic()
        async with asyncio.timeout(max(300, REQUESTS * 0.3)):  # a hang fails it
            await asyncio.gather(*(w.run() for w in workers))
        elapsed = time.monotonic() - started
        done = sum((w.done for w in workers), Counter())
        assert sum(done.values()) == REQUESTS, done
        print(f"soak: {REQUESTS} requests in {elapsed:.1f}s: {dict(done)}")

        # Every task is terminal, and each persona lists every task sent to it.
        for persona in PERSONAS:
            client = await hub.client(persona)
            listed = {t.id: t for t in await _all_tasks(client)}
            ours = {tid for w in workers if w.persona == persona for tid in w.tasks}
            assert ours <= set(listed)
            assert {t.status.state for t in listed.values()} <= TERMINAL_STATES

            # Every answer is the answer to its own question.
            for worker in (w for w in workers if w.persona == persona):
                for task_id, question in worker.tasks.items():
                    task = listed[task_id]
                    if question and task.status.state == TaskState.TASK_STATE_COMPLETED:
                        full = await get_task(client, task_id)
                        assert answer_text(full) == DEFAULT_ANSWER + question

        # Histories: turns alternate, and a conversation only ever holds its own context.
        for request in llm.requests:
            turns = [m for m in request["messages"] if m["role"] != "system"]
            roles = [m["role"] for m in turns]
            assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"], roles
            contexts = {
                match["context"]
                for m in turns
                if m["role"] == "user" and (match := TAG.match(m["content"]))
            }
            assert len(contexts) == 1, contexts

        # And the hub answers normally.
        assert (await hub.http.get("/healthz")).json()["status"] == "ok"
        llm.script(Reply("Fresh as ever."))
        final = await send(await hub.client("charles-darwin"), "Still with us?")
        assert answer_text(final) == "Fresh as ever."
