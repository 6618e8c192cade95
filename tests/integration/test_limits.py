"""Per-caller limits on A2A: requests a minute, running tasks, open streams, and a
persona's own limits; refused with 429 and Retry-After, recorded in the audit log."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import grpc.aio
import httpx
import pytest
import yaml
from a2a.types import a2a_pb2_grpc
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from persona_agent.security.api_keys import hash_key
from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.integration.a2a_helpers import user_message
from tests.integration.conftest import Hub, HubFactory

V1 = {"A2A-Version": "1.0"}
ALICE = {"Authorization": "Bearer alice-key-0123456789abcdef", **V1}
BOB = {"Authorization": "Bearer bob-key-0123456789abcdef00", **V1}
KEYS = "alice-key-0123456789abcdef,bob-key-0123456789abcdef00"


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def message(text: str = "Hi") -> dict[str, Any]:
    return {"message": {"messageId": f"m-{text}", "role": "ROLE_USER", "parts": [{"text": text}]}}


async def get_task(
    hub: Hub, headers: dict[str, str], http: httpx.AsyncClient | None = None
) -> httpx.Response:
    return await (http or hub.http).post(
        "/a2a/socrates/", json=rpc("GetTask", {"id": "none"}), headers=headers
    )


async def test_requests_a_minute_per_caller(hub_factory: HubFactory, tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    overrides = {"rate_limit": 3, "limit_loopback": True, "audit_log": str(log)}
    async with hub_factory(api_keys=KEYS, **overrides) as hub:
        for _ in range(3):
            assert (await get_task(hub, ALICE)).status_code == 200
        refused = await get_task(hub, ALICE)
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert "at most 3 a minute" in refused.json()["error"]["message"]
        rest = await hub.http.get("/a2a/socrates/tasks/none", headers=ALICE)
        assert rest.status_code == 429
        assert rest.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
        assert (await get_task(hub, BOB)).status_code == 200  # another caller's own budget
        # Anonymous callers are counted by address (this machine's too, with
        # PERSONA_AGENT_LIMIT_LOOPBACK); cards are never limited.
        for _ in range(3):
            await get_task(hub, V1)
        assert (await get_task(hub, V1)).status_code == 429
        card = await hub.http.get("/a2a/socrates/.well-known/agent-card.json")
        assert card.status_code == 200
    refusals = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    alice = f"key:{hash_key('alice-key-0123456789abcdef')[:12]}"
    assert [(e["action"], e["principal"], e["persona"], e["outcome"]) for e in refusals] == [
        ("rate.refused", alice, "socrates", "429"),
        ("rate.refused", alice, "socrates", "429"),
        ("rate.refused", "anonymous", "socrates", "429"),
    ]


async def test_running_tasks_per_caller(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(api_keys=KEYS, max_running_tasks=1) as hub:
        llm.script(Hang(), Reply("Bob's answer."))
        async with httpx.AsyncClient(base_url=hub.settings.base_url, headers=ALICE) as alice:
            first = await alice.post(
                "/a2a/socrates/",
                json=rpc(
                    "SendMessage", {**message("one"), "configuration": {"returnImmediately": True}}
                ),
            )
            assert first.status_code == 200, first.text
            await asyncio.to_thread(llm.wait_requests, 1)
            second = await alice.post("/a2a/socrates/", json=rpc("SendMessage", message("two")))
            assert second.status_code == 429
            assert "Too many running tasks: at most 1" in second.json()["error"]["message"]
        bob = await hub.http.post(
            "/a2a/socrates/", json=rpc("SendMessage", message("bob")), headers=BOB
        )
        assert bob.status_code == 200
        assert bob.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_personas_own_limits(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(api_keys=KEYS) as hub:
        path = hub.settings.personas_dir / "socrates.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["limits"] = {"requests_per_minute": 2, "running_tasks": 1}
        headers = {"Authorization": ALICE["Authorization"]}
        assert (
            await hub.http.put("/api/v1/personas/socrates", json=data, headers=headers)
        ).status_code == 200
        llm.script(Hang())
        started = await hub.http.post(
            "/a2a/socrates/",
            json=rpc("SendMessage", {**message("a"), "configuration": {"returnImmediately": True}}),
            headers=ALICE,
        )
        assert started.status_code == 200
        await asyncio.to_thread(llm.wait_requests, 1)
        busy = await hub.http.post(
            "/a2a/socrates/", json=rpc("SendMessage", message("b")), headers=BOB
        )
        assert busy.status_code == 429
        assert "Persona 'socrates' is answering 1 tasks already" in busy.json()["error"]["message"]
        # Alice's second request a minute to socrates was the first one; her third is refused.
        assert (await get_task(hub, ALICE)).status_code == 200
        assert (await get_task(hub, ALICE)).status_code == 429
        # Other personas are not limited.
        other = await hub.http.post(
            "/a2a/ada-lovelace/", json=rpc("GetTask", {"id": "x"}), headers=ALICE
        )
        assert other.status_code == 200


async def test_open_streams_per_caller(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(api_keys=KEYS, max_streams=1) as hub:
        llm.script(Hang())
        async with httpx.AsyncClient(
            base_url=hub.settings.base_url, headers=ALICE, timeout=30
        ) as alice:
            async with alice.stream(
                "POST", "/a2a/socrates/", json=rpc("SendStreamingMessage", message("s1"))
            ) as first:
                assert first.status_code == 200
                await asyncio.to_thread(llm.wait_requests, 1)
                second = await alice.post(
                    "/a2a/socrates/", json=rpc("SendStreamingMessage", message("s2"))
                )
                assert second.status_code == 429
                assert "Too many open streams: at most 1" in second.json()["error"]["message"]
            # The stream closed: its place is free again.
            async with asyncio.timeout(60):
                while True:
                    llm.script(Reply("Again."))
                    again = await alice.post(
                        "/a2a/socrates/", json=rpc("SendStreamingMessage", message("s3"))
                    )
                    if again.status_code == 200:
                        break
                    await asyncio.sleep(0.05)


REMOTE = ("203.0.113.7", 40000)
"""An anonymous client on another machine."""


def send_later(text: str) -> dict[str, Any]:
    """A SendMessage that answers at once, the task going on."""
    return rpc("SendMessage", {**message(text), "configuration": {"returnImmediately": True}})


async def test_by_default_a_flood_from_one_anonymous_client_is_refused(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:  # the defaults: 600 requests a minute, 32 tasks
        transport = httpx.ASGITransport(app=hub.app, client=REMOTE)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=V1
        ) as flood:
            llm.script(*[Hang() for _ in range(33)])
            for n in range(32):
                started = await flood.post("/a2a/socrates/", json=send_later(f"t{n}"))
                assert started.status_code == 200, started.text
            await asyncio.to_thread(llm.wait_requests, 32, 10.0)
            refused = await flood.post("/a2a/socrates/", json=send_later("t32"))
            assert refused.status_code == 429
            text = refused.json()["error"]["message"]
            assert "at most 32 at once (PERSONA_AGENT_MAX_RUNNING_TASKS)" in text
            # 33 requests so far: the rest of a minute's 600 (and the few that come back
            # meanwhile, one every 0.1 s), then 429.
            accepted = 0
            while (limited := await get_task(hub, V1, flood)).status_code == 200:
                accepted += 1
                assert accepted < 1000, "a flood of requests is not limited"
            assert accepted >= 600 - 33
            assert limited.status_code == 429
            assert "at most 600 a minute (PERSONA_AGENT_RATE_LIMIT)" in refusal(limited)
        # Another client is not held back by the flood.
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=hub.app, client=("198.51.100.9", 1)),
            base_url="http://127.0.0.1",
            headers=V1,
        ) as other:
            assert (await get_task(hub, V1, other)).status_code == 200


def refusal(response: httpx.Response) -> str:
    return str(response.json()["error"]["message"])


async def test_by_default_a_normal_session_and_this_machine_are_not_limited(
    hub_factory: HubFactory, llm: FakeLLM, personas_dir: Path
) -> None:
    forum = {
        "name": "Forum",
        "description": "A moderated panel.",
        "panel": {
            "mode": "moderated",
            "members": ["albert-einstein", "charles-darwin", "marie-curie", "ada-lovelace"],
            "moderator": "socrates",
            "rounds": 4,
        },
    }
    (personas_dir / "forum.yaml").write_text(yaml.safe_dump(forum), encoding="utf-8")
    async with hub_factory() as hub:
        # A conversation of an anonymous user elsewhere, a panel's answer included.
        transport = httpx.ASGITransport(app=hub.app, client=REMOTE)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=V1, timeout=30
        ) as user:
            context = None
            for n in range(10):
                llm.script(Reply(f"Answer {n}."))
                body = message(f"q{n}")
                if context is not None:
                    body["message"]["contextId"] = context
                answer = await user.post("/a2a/socrates/", json=rpc("SendMessage", body))
                assert answer.status_code == 200, answer.text
                context = answer.json()["result"]["task"]["contextId"]
            llm.reset()  # every member and the moderator answer with the default reply
            for panel_id in ("science-panel", "forum"):
                panel = await user.post(
                    f"/a2a/{panel_id}/", json=rpc("SendMessage", message("A panel?"))
                )
                assert panel.status_code == 200, panel.text
                state = panel.json()["result"]["task"]["status"]["state"]
                assert state == "TASK_STATE_COMPLETED"
        # This machine (the console, the terminal chat, a benchmark): 64 tasks at once.
        llm.script(*[Hang() for _ in range(64)])
        sends = [
            hub.http.post("/a2a/socrates/", json=send_later(f"b{n}"), headers=V1) for n in range(64)
        ]
        answers = await asyncio.gather(*sends)
        assert [a.status_code for a in answers] == [200] * 64


@pytest.mark.parametrize("setting", ["rate_limit", "max_running_tasks", "max_streams"])
def test_limits_are_settings(setting: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from persona_agent.settings import Settings

    monkeypatch.setenv(f"PERSONA_AGENT_{setting.upper()}", "5")
    assert getattr(Settings(_env_file=None), setting) == 5  # type: ignore[call-arg]
    monkeypatch.setenv(f"PERSONA_AGENT_{setting.upper()}", "-1")
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Settings(_env_file=None)  # type: ignore[call-arg]


async def test_an_idle_stream_is_ended_and_its_task_goes_on(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    # The model hangs for longer than the test can take (its task must still be working).
    settings = {"stream_idle_seconds": 1, "grpc_port": 0, "mcp_config": None, "llm_timeout": 300}
    async with hub_factory(**settings) as hub:
        llm.script(Hang(), Hang())
        events: list[str] = []
        async with (
            asyncio.timeout(60),
            hub.http.stream(
                "POST",
                "/a2a/socrates/",
                json=rpc("SendStreamingMessage", message("idle")),
                headers=V1,
            ) as stream,
        ):
            assert stream.status_code == 200
            async for line in stream.aiter_lines():  # ends when the hub ends the stream
                if line.startswith("data:"):
                    events.append(line)
        first = json.loads(events[0].removeprefix("data:"))
        task_id = first["result"]["task"]["id"]
        task = await hub.http.post(
            "/a2a/socrates/", json=rpc("GetTask", {"id": task_id}), headers=V1
        )
        assert task.json()["result"]["status"]["state"] == "TASK_STATE_WORKING"

        # The same on gRPC: the stream ends (status OK) after its first event, the task goes on.
        card = await hub.card("socrates")
        (address,) = [i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
        async with grpc.aio.insecure_channel(address) as channel, asyncio.timeout(60):
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            request = user_message("idle")
            request.tenant = "socrates"
            answers = [answer async for answer in stub.SendStreamingMessage(request)]
            assert answers[0].WhichOneof("payload") == "task"  # then working, then nothing
            got = await stub.GetTask(GetTaskRequest(tenant="socrates", id=answers[0].task.id))
        assert got.status.state == TaskState.TASK_STATE_WORKING


async def test_a_stream_with_news_is_not_idle(hub_factory: HubFactory, llm: FakeLLM) -> None:
    # Tokens half a second apart for six seconds, twice the idle limit: the stream is never
    # idle for three seconds, though it lasts longer. The limit is not shorter, so that a busy
    # machine's slow first event (the task written before it is sent) is not taken for idling.
    async with hub_factory(stream_idle_seconds=3) as hub:
        text = " ".join(f"word{i}" for i in range(12))
        llm.script(Reply(text, token_delay=0.5))
        async with hub.http.stream(
            "POST",
            "/a2a/socrates/",
            json=rpc("SendStreamingMessage", message("busy")),
            headers=V1,
        ) as stream:
            body = "".join([line async for line in stream.aiter_lines()])
        assert "TASK_STATE_COMPLETED" in body
        assert "word11" in body
