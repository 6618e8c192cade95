"""What a persona file or a message's data can make the event loop do: never more than
bounded, linear work, heavy work in a worker thread. Each hostile input goes through its
real door (REST, upload, A2A with the SDK client); while it is processed, ``/healthz`` and
another persona keep answering (:func:`while_live`). Where the heavy work goes to a worker
thread, it is held there (tests/held_work.py) and another request is served *while* it
waits: shown by events, not by the clock.

Before: a lore regex key with a greeting written for it blocked every persona for seconds
on one "hi"; a card of thousands of ``{{char}}`` became a 97 MB agent card; a deeply
nested data part became 30 times its size as indented JSON; a big lorebook casefolded the
message once per entry; each PNG export encoded its image again.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import TaskState

from persona_agent.personas.formats.lore_scan import lore_selection_sync
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.held_work import held_in_worker_threads
from tests.integration.a2a_helpers import send
from tests.integration.conftest import Hub, HubFactory
from tests.personas import persona_data

API = "/api/v1/personas"
T = TypeVar("T")
LIVE = 60.0
"""Seconds within which each check of :func:`while_live` must be answered: a safety bound
against a hang, not a timing (a busy two-core machine takes seconds to answer; that the
loop stays free while heavy work runs is shown by holding the work, as in
:func:`test_a_big_lorebook_and_a_long_message_are_scanned_off_the_event_loop`)."""


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def while_live(hub: Hub, hostile: Awaitable[T], *, other: str = "socrates") -> T:
    """Run ``hostile``; meanwhile, again and again until it is done, ``/healthz`` and a
    message to the persona ``other`` (the SDK client) must each be answered (within
    :data:`LIVE`). The hostile work's result."""
    client = await hub.client(other)
    work = asyncio.ensure_future(hostile)
    checks = 0
    try:
        async with asyncio.timeout(4 * LIVE):
            while checks == 0 or not work.done():
                await served(hub, client, f"still there? {checks}", other)
                checks += 1
            return await work
    finally:
        if not work.done():
            work.cancel()


async def served(hub: Hub, client: Client, text: str, other: str = "socrates") -> None:
    """``/healthz`` answers, and the persona ``other`` (its SDK ``client``) answers ``text``."""
    async with _live("/healthz"):
        health = await hub.http.get("/healthz")
    assert health.json()["status"] == "ok"
    async with _live(other):
        task = await send(client, text)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED


@asynccontextmanager
async def _live(what: str) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(LIVE):
            yield
    except TimeoutError:
        raise AssertionError(f"{what} waited on the hostile input ({LIVE:g} s)") from None


async def create(hub: Hub, persona_id: str, **fields: Any) -> Any:
    return await hub.http.post(API, json={"id": persona_id, **persona_data(**fields)})


async def test_a_regex_key_written_to_backtrack_does_not_stall_the_hub(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    # Python's re takes 2^n steps for (a+)+$ on n a's and a '!': 24 took seconds.
    trap = {
        "greeting": "a" * 24 + "!",
        "lore": {"entries": [{"keys": ["/(a+)+$/"], "content": "Never brought up."}]},
    }
    async with hub_factory() as hub:
        created = await create(hub, "trap", **trap)
        assert created.status_code == 201, created.text

        async def hi() -> Any:
            return await send(await hub.client("trap"), "hi")

        task = await while_live(hub, hi())
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        trapped = [r for r in llm.requests if "Tess Tester" in r["messages"][0]["content"]]
        assert "Never brought up." not in trapped[-1]["messages"][0]["content"]


async def test_a_regex_key_re2_cannot_take_is_refused_at_each_door(hub_factory: HubFactory) -> None:
    entry = {"keys": ["dragon", r"/(\w+) \1/"], "content": "c", "comment": "Echoes"}
    reason = r"invalid escape sequence: \1"
    async with hub_factory() as hub:
        body = await create(hub, "echo", lore={"entries": [{"content": "x"}, entry]})
        assert body.status_code == 422
        (error,) = body.json()["detail"]
        assert error["loc"] == ["body", "lore", "entries", 1]
        assert error["msg"].startswith(r"keys[1] '/(\w+) \1/' of the entry 'Echoes' is a")
        assert reason in error["msg"]

        card = {
            "spec": "chara_card_v3",
            "spec_version": "3.0",
            "data": {
                "name": "Echo",
                "description": "d",
                "character_book": {"entries": [{**entry, "use_regex": True}]},
            },
        }
        files = {"file": ("echo.json", json.dumps(card).encode(), "application/json")}
        upload = await hub.http.post(
            f"{API}/upload", files=files, headers={"X-Requested-With": "t"}
        )
        assert upload.status_code == 422
        (problem,) = upload.json()["detail"]
        assert problem["msg"].startswith(
            r"echo.json: data.character_book.entries[0]: keys[1] '/(\w+) \1/' of the entry"
        )
        assert reason in problem["msg"]
        assert (await hub.http.get(f"{API}/echo")).status_code == 404


def macro_bomb_card() -> dict[str, Any]:
    """The card of the report: 60 KB, a long name and a greeting of {{char}}."""
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": "N" * 2000, "description": "d", "first_mes": "{{char}}" * 7000},
    }


async def test_a_card_whose_macros_expand_too_far_is_refused_while_the_hub_serves(
    hub_factory: HubFactory,
) -> None:
    async with hub_factory() as hub:
        raw = json.dumps(macro_bomb_card()).encode()
        assert len(raw) < 64 * 1024

        async def hostile() -> list[Any]:
            files = {"file": ("bomb.json", raw, "application/json")}
            upload = await hub.http.post(
                f"{API}/upload", files=files, headers={"X-Requested-With": "t"}
            )
            body = await create(hub, "bomb", name="N" * 2000, greeting="{{char}}" * 7000)
            return [upload, body]

        upload, body = await while_live(hub, hostile())
        assert upload.status_code == 422, upload.text[:300]
        (problem,) = upload.json()["detail"]
        assert problem["msg"].startswith("bomb.json: data.first_mes: with its macros expanded")
        assert "14,000,000 of them" in problem["msg"]
        assert "(PERSONA_AGENT_MAX_PERSONA_BYTES)" in problem["msg"]
        assert body.status_code == 422, body.text[:300]
        (error,) = body.json()["detail"]
        assert error["loc"] == ["body", "greeting"]
        assert (await hub.http.get("/a2a/bomb/.well-known/agent-card.json")).status_code == 404


def nested(depth: int, leaf: Any) -> Any:
    """``leaf`` inside ``depth`` lists (a list in a protobuf Value is two levels of its
    100; a mapping, four)."""
    value = leaf
    for level in range(depth):
        value = [level, value]
    return value


async def test_a_deeply_nested_data_part_reaches_the_model_as_compact_json(
    hub: Hub, llm: FakeLLM
) -> None:
    # 30 deep (the SDK client reads no deeper echo): as indented JSON, each value was a
    # line of more than 60 spaces.
    # 30,000 values: the SDK checked each for required fields (57 µs a value: 1.7 s); its
    # reading of the JSON body (about 8 µs a value) is what is left on the event loop.
    data = {"deep": nested(30, {"values": list(range(30_000))})}
    # Sent as JSON-RPC with httpx, not the SDK client: in this process, the client's own
    # conversion of 100,000 values to and from protobuf would hold the event loop too.
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "Sum these:"}, {"data": data}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}

    llm.script_for("You are Albert Einstein.", Reply("Summed."))  # not an echo of it all

    async def hostile() -> Any:
        return await hub.http.post(
            "/a2a/albert-einstein/", json=body, headers={"A2A-Version": "1.0"}, timeout=60
        )

    reply = await while_live(hub, hostile())
    assert reply.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    (asked,) = [r for r in llm.requests if "Sum these:" in str(r["messages"][-1]["content"])]
    content = asked["messages"][-1]["content"]
    embedded = content.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert "\n" not in embedded  # compact: no indentation
    assert ": " not in embedded
    assert len(embedded) < 2 * len(json.dumps(data))
    assert json.loads(embedded) == data  # numbers come back as doubles: 1.0 == 1


async def test_a_big_lorebook_and_a_long_message_are_scanned_off_the_event_loop(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    entries = [{"keys": [f"Key{n}word", f"other{n}"], "content": f"Lore {n}."} for n in range(4999)]
    entries.append({"keys": ["/needle (here|there)/"], "content": "The needle."})
    async with hub_factory() as hub:
        created = await create(hub, "library", lore={"entries": entries})
        assert created.status_code == 201, created.text[:300]
        message = "word " * 120_000 + "the needle there, and KEY4998WORD."
        llm.script_for("You are Tess Tester.", Reply("Noted."))  # not an echo of it all

        library, socrates = await hub.client("library"), await hub.client("socrates")
        async with held_in_worker_threads(lore_selection_sync) as scan:
            sending = asyncio.ensure_future(send(library, message))
            await scan.running(instead=sending)  # the scan is in a worker thread, held there
            await served(hub, socrates, "while the lorebook is scanned?")
            assert not sending.done()
            scan.release()
            task = await while_live(hub, sending)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        (asked,) = [r for r in llm.requests if "Tess Tester" in r["messages"][0]["content"]]
        prompt = asked["messages"][0]["content"]
        assert "The needle." in prompt
        assert "Lore 4998." in prompt
        assert "Lore 1." not in prompt


async def test_a_lorebook_over_the_entry_limit_is_refused(hub_factory: HubFactory) -> None:
    entries = [{"keys": [f"k{n}"], "content": "c"} for n in range(101)]
    text = json.dumps(persona_data(lore={"entries": entries})).encode()
    async with hub_factory(max_lore_entries=100) as hub:
        files = {"file": ("library.json", text, "application/json")}
        upload = await hub.http.post(
            f"{API}/upload", files=files, headers={"X-Requested-With": "t"}
        )
        assert upload.status_code == 422
        (problem,) = upload.json()["detail"]
        assert problem["msg"] == (
            "library.json: lore.entries: the lorebook has 101 entries, more than the limit of "
            "100 (PERSONA_AGENT_MAX_LORE_ENTRIES)"
        )
        # The REST JSON body is held to the hub's limits too, not the defaults.
        body = {"id": "library", **persona_data(lore={"entries": entries})}
        created = await hub.http.post(API, json=body)
        assert created.status_code == 422
        (problem,) = created.json()["detail"]
        assert "more than the limit of 100 (PERSONA_AGENT_MAX_LORE_ENTRIES)" in problem["msg"]


async def test_required_fields_are_still_checked_when_a_message_carries_data(hub: Hub) -> None:
    data = {"data": {"values": list(range(1000))}, "metadata": {"a": [1, 2]}}
    for message in (
        {"messageId": "m1", "parts": [data]},  # no role
        {"messageId": "m2", "role": "ROLE_USER", "parts": []},  # no part
    ):
        body = {"jsonrpc": "2.0", "id": 3, "method": "SendMessage", "params": {"message": message}}
        reply = await hub.http.post("/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"})
        assert reply.json()["error"]["code"] == -32602, reply.text
