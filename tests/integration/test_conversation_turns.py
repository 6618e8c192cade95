"""A turn the REST API starts (regenerate, continue) is an A2A task of the persona, through
real HTTP (uvicorn), the real a2a-sdk client and the scripted model: the caller's task
(GetTask, and no other caller's), streamed as server-sent events, canceled with CancelTask
and resubscribed with SubscribeToTask by its id, audited and counted; authorized as a call
on the persona, the consultations it makes as that caller's (issues 46 and 47)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2AClientError, Client
from a2a.types.a2a_pb2 import CancelTaskRequest, SubscribeToTaskRequest, TaskState
from a2a.utils.errors import A2AError

from persona_agent.api.routes.chats import conversation_turns
from tests.fakes.fake_llm import Fail, FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import (
    answer_text,
    get_task,
    send,
    status_text,
    wait_for_state,
)
from tests.integration.conftest import Hub, HubFactory
from tests.integration.persona_yaml import persona, write
from tests.integration.test_metrics import scrape, value

BASE = "/api/v1/conversations"
KEYS: list[dict[str, Any]] = [
    {"name": "alice", "key": "alice-key-0123456789abcdef"},
    {"name": "bob", "key": "bob-key-0123456789abcdef00"},
    {"name": "limited", "key": "limited-key-0123456789abcd", "personas": ["sage"]},
    {"name": "elsewhere", "key": "elsewhere-key-0123456789ab", "personas": ["oracle"]},
    {
        "name": "memory",
        "key": "memory-key-0123456789abcdef",
        "scopes": ["memory:read", "memory:write"],
    },
]
CALLERS = {entry["name"]: {"X-API-Key": str(entry["key"])} for entry in KEYS}
SSE = {"Accept": "text/event-stream"}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers: no persona here calls an MCP tool."""
    return None


@pytest.fixture(autouse=True)
def personas(personas_dir: Path) -> None:
    write(personas_dir, "sage", persona("Sage", consult=["oracle"], greeting="Well met."))
    write(personas_dir, "oracle", persona("Oracle"))


Clients = Callable[..., Awaitable[Client]]
"""``clients(hub, name, persona_id="sage", streaming=False)``: a real a2a-sdk client of the
persona with the credentials of caller ``name``."""


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    opened: list[httpx.AsyncClient] = []

    async def client(
        hub: Hub, name: str, persona_id: str = "sage", *, streaming: bool = False
    ) -> Client:
        base = str(hub.http.base_url)
        http = httpx.AsyncClient(base_url=base, headers=CALLERS[name], timeout=30)
        opened.append(http)
        return await hub.client(persona_id, http=http, streaming=streaming)

    yield client
    for http in opened:
        await http.aclose()


async def chat(client: Client, context_id: str, *texts: str) -> None:
    """Messages over A2A (blocking sends)."""
    for text in texts:
        task = await send(client, text, context_id)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The server-sent events of a response, as (name, data)."""
    name = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, json.loads(line.removeprefix("data: "))


def asked(llm: FakeLLM, name: str) -> bool:
    """Whether the model was asked as the persona ``name`` (its system prompt)."""
    return any(
        m["role"] == "system" and f"You are {name}" in str(m["content"])
        for request in llm.requests
        for m in request["messages"]
    )


async def test_a_rest_regenerate_is_the_callers_task_audited_and_counted(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, clients: Clients
) -> None:
    log = tmp_path / "audit.jsonl"
    async with hub_factory(api_keys=json.dumps(KEYS), audit_log=str(log)) as hub:
        llm.script(Reply("a1"), Reply("a1 bis"))
        await chat(await clients(hub, "alice"), "c1", "q1")
        before = await scrape(hub, **CALLERS["alice"])
        response = await hub.http.post(
            f"{BASE}/sage/c1/regenerate", json={}, headers=CALLERS["alice"]
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["answer"], body["state"]) == ("a1 bis", "completed")
        assert body["conversation"]["messages"][-1]["swipes"]["texts"] == ["a1", "a1 bis"]
        assert body["cost"]["kind"] == "cost-v1"  # its tokens and time, as over A2A
        assert body["cost"]["usage"]["totalTokens"] > 0
        task_id = body["task_id"]
        # The caller's task, on the persona's A2A endpoint; another caller does not find it.
        task = await get_task(await clients(hub, "alice"), task_id)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert (task.context_id, answer_text(task)) == ("c1", "a1 bis")
        with pytest.raises((A2AClientError, A2AError)):
            await get_task(await clients(hub, "bob"), task_id)
        after = await scrape(hub, **CALLERS["alice"])
    for name, labels in [
        ("persona_agent_tasks_total", {"persona": "sage", "state": "completed"}),
        ("persona_agent_a2a_requests_total", {"persona": "sage", "binding": "rest"}),
    ]:
        grown = sum(
            count - before.get(key, 0.0)
            for key, count in after.items()
            if key[0] == name and set(labels.items()) <= set(key[1])
        )
        assert grown == 1, (name, labels)
    assert value(after, "persona_agent_tasks_running", persona="sage") == 0
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    created = [r for r in records if r["action"] == "task.create" and r["taskId"] == task_id]
    assert [(r["principal"], r["persona"], r["contextId"]) for r in created] == [
        ("key:alice", "sage", "c1")
    ]


async def test_a_streamed_regenerate_is_resubscribed_and_canceled(
    hub_factory: HubFactory, llm: FakeLLM, clients: Clients
) -> None:
    """The SSE form gives the task's id first, then the answer as it is written; another
    client follows the task with SubscribeToTask and cancels it with CancelTask: the stream
    ends with the cancel, the task is canceled and the conversation as it was."""
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        llm.script(Reply("a1"))
        await chat(await clients(hub, "alice"), "c2", "q1")
        url = f"{BASE}/sage/c2"
        before = (await hub.http.get(url, headers=CALLERS["alice"])).json()
        llm.script(Reply("slow " * 400, token_delay=0.05))
        client = await clients(hub, "alice", streaming=True)
        seen: list[tuple[str, dict[str, Any]]] = []
        async with asyncio.timeout(60):
            async with hub.http.stream(
                "POST", f"{url}/regenerate", json={}, headers={**CALLERS["alice"], **SSE}
            ) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                stream = events(response)
                seen.append(await anext(stream))
                assert seen[0][0] == "task"
                task_id = seen[0][1]["task_id"]
                assert seen[0][1]["context_id"] == "c2"
                seen.append(await anext(stream))
                assert seen[1][0] == "text"  # the answer is being written
                subscribed = client.subscribe(SubscribeToTaskRequest(id=task_id))
                first = await anext(subscribed)
                assert first.task.id == task_id
                assert first.task.status.state == TaskState.TASK_STATE_WORKING
                canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                seen += [event async for event in stream]
                followed = [event async for event in subscribed]
        name, data = seen[-1]
        assert name == "error", seen[-3:]
        assert (data["status"], data["state"], data["task_id"]) == (409, "canceled", task_id)
        assert followed[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        task = await get_task(client, task_id)
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        assert (await hub.http.get(url, headers=CALLERS["alice"])).json() == before


async def test_a_streamed_continue_ends_with_the_answer(
    hub_factory: HubFactory, llm: FakeLLM, clients: Clients
) -> None:
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        llm.script(
            Reply("Once upon"), Reply(" a time, there was", chunks=[" a time,", " there was"])
        )
        await chat(await clients(hub, "alice"), "c3", "Tell me a story")
        async with hub.http.stream(
            "POST", f"{BASE}/sage/c3/continue", json={}, headers={**CALLERS["alice"], **SSE}
        ) as response:
            assert response.status_code == 200
            seen = [event async for event in events(response)]
        names = [name for name, _ in seen]
        # (pieces the model sends close together may come as one text event)
        assert (names[0], names[-1]) == ("task", "answer")
        assert set(names[1:-1]) == {"text"}
        assert "".join(data["text"] for name, data in seen if name == "text") == (
            " a time, there was"
        )
        answer = seen[-1][1]
        assert (answer["answer"], answer["task_id"]) == (
            " a time, there was",
            seen[0][1]["task_id"],
        )
        last = answer["conversation"]["messages"][-1]
        assert last["content"] == "Once upon a time, there was"
        assert answer["cost"]["usage"]["totalTokens"] > 0


async def test_a_failed_model_fails_the_task_and_answers_502(
    hub_factory: HubFactory, llm: FakeLLM, clients: Clients
) -> None:
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        llm.script(Reply("a1"))
        await chat(await clients(hub, "alice"), "c4", "q1")
        llm.script(Fail(500))
        response = await hub.http.post(
            f"{BASE}/sage/c4/regenerate", json={}, headers=CALLERS["alice"]
        )
        assert response.status_code == 502, response.text
        detail = response.json()["detail"]
        assert "reference" in detail  # the task's message: its log line's reference
        llm.script(Fail(500))
        async with hub.http.stream(
            "POST", f"{BASE}/sage/c4/regenerate", json={}, headers={**CALLERS["alice"], **SSE}
        ) as streamed:
            seen = [event async for event in events(streamed)]
        name, data = seen[-1]
        assert (name, data["status"], data["state"]) == ("error", 502, "failed")
        task = await get_task(await clients(hub, "alice"), data["task_id"])
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert status_text(task) == data["detail"]


async def test_regenerate_and_continue_are_calls_on_the_persona(
    hub_factory: HubFactory, llm: FakeLLM, clients: Clients
) -> None:
    """A key for other personas, and one with memory scopes and no ``a2a``, cannot run the
    persona through the conversation routes (403 as over A2A), whatever conversation it
    holds; the model is never asked."""
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        llm.script(Reply("a1"))
        await chat(await clients(hub, "alice"), "c5", "q1")
        # The memory-only key's own conversation: started and edited through REST.
        started = await hub.http.post(
            BASE, json={"persona_id": "sage", "context_id": "mine"}, headers=CALLERS["memory"]
        )
        assert started.status_code == 201, started.text
        asked_before = len(llm.requests)
        for operation in ("regenerate", "continue"):
            for name, context_id in [("memory", "mine"), ("elsewhere", "c5"), ("elsewhere", "x")]:
                for headers in (CALLERS[name], {**CALLERS[name], **SSE}):
                    response = await hub.http.post(
                        f"{BASE}/sage/{context_id}/{operation}", json={}, headers=headers
                    )
                    assert response.status_code == 403, (operation, name, response.text)
                    assert "detail" in response.json()
        assert len(llm.requests) == asked_before
        # Over A2A the same callers are refused the same way.
        for name in ("memory", "elsewhere"):
            with pytest.raises((A2AClientError, A2AError), match=r"403|lacks|may not"):
                await send(await clients(hub, name), "q", "c5")


@pytest.mark.parametrize(("caller", "consulted"), [("limited", False), ("alice", True)])
async def test_a_consultation_inside_a_regenerate_is_the_callers(
    hub_factory: HubFactory, llm: FakeLLM, clients: Clients, caller: str, consulted: bool
) -> None:
    """Sage consults the oracle while it regenerates: for a key limited to sage the
    consultation is refused (as over A2A), for a key that may call the oracle it is made."""
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        llm.script(Reply("a1"))
        await chat(await clients(hub, caller), "c6", "q1")
        llm.reset()
        llm.script_for(
            "You are Sage", ToolCalls([("consult__oracle", {"question": "Hi?"})]), Reply("Done.")
        )
        llm.script_for("You are Oracle", Reply("The oracle speaks."))
        response = await hub.http.post(
            f"{BASE}/sage/c6/regenerate", json={}, headers=CALLERS[caller]
        )
        assert response.status_code == 200, response.text
        assert response.json()["answer"] == "Done."
        results = [
            str(m["content"])
            for request in llm.requests
            for m in request["messages"]
            if m["role"] == "tool"
        ]
        assert asked(llm, "Oracle") is consulted
        if consulted:
            assert "The oracle speaks." in results[-1]
        else:
            assert "may not consult" in results[-1], results


async def test_a_quiet_stream_is_kept_with_pings(
    hub_factory: HubFactory, llm: FakeLLM, clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the model says nothing, the stream sends comments (a proxy keeps it open)."""
    monkeypatch.setattr(conversation_turns, "PING_SECONDS", 0.1)
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        llm.script(Reply("a1"), Reply("late", token_delay=1.0))
        await chat(await clients(hub, "alice"), "c7", "q1")
        lines: list[str] = []
        async with hub.http.stream(
            "POST", f"{BASE}/sage/c7/regenerate", json={}, headers={**CALLERS["alice"], **SSE}
        ) as response:
            lines = [line async for line in response.aiter_lines() if line]
    first_text = lines.index("event: text")
    assert ": ping" in lines[:first_text], lines
    assert lines[-2] == "event: answer"


async def test_a_client_that_leaves_the_stream_cancels_the_task(
    hub_factory: HubFactory, llm: FakeLLM, clients: Clients
) -> None:
    async with hub_factory(api_keys=json.dumps(KEYS)) as hub:
        llm.script(Reply("a1"))
        client = await clients(hub, "alice")
        await chat(client, "c8", "q1")
        before = (await hub.http.get(f"{BASE}/sage/c8", headers=CALLERS["alice"])).json()
        llm.script(Reply("slow " * 400, token_delay=0.05))
        async with hub.http.stream(
            "POST", f"{BASE}/sage/c8/continue", json={}, headers={**CALLERS["alice"], **SSE}
        ) as response:
            stream = events(response)
            name, started = await anext(stream)
            assert name == "task"
            assert (await anext(stream))[0] == "text"
        # The client is gone mid-answer: its task is canceled, the answer left as it was.
        await asyncio.to_thread(llm.wait_disconnect, 10.0)
        task = await wait_for_state(client, started["task_id"], TaskState.TASK_STATE_CANCELED)
        assert task.context_id == "c8"
        after = (await hub.http.get(f"{BASE}/sage/c8", headers=CALLERS["alice"])).json()
        assert after == before
