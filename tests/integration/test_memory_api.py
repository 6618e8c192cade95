"""Memory a caller manages (docs/memory.md, "Managing memory"), through the real hub over
HTTP: what a persona remembered is listed, searched, edited, deleted and exported by its
caller, never by another; the right to be forgotten deletes every trace of a caller with
every persona and is in the audit log; the scopes are one decision's. On SQLite, and on
PostgreSQL when one answers.

Make a record query leave out the owner (``MemoryRecords``) and the cross-caller test
fails; make ``CallerData.forget`` skip a store and the forgetting test does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest
from typer.testing import CliRunner, Result

from persona_agent.cli.commands import app
from persona_agent.personas.turn_prompt import REMEMBERED_HEADING
from tests.conftest import migrated_postgres
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import Hub, HubFactory
from tests.integration.test_auth import REFUSED

ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef00"
READER_KEY = "memory-reader-0123456789ab"
TALKER_KEY = "a2a-only-key-0123456789abc"
ADMIN_KEY = "memory-admin-0123456789abc"
KEYS = json.dumps(
    [
        {"name": "alice", "key": ALICE_KEY},
        {"name": "bob", "key": BOB_KEY},
        {"name": "reader", "key": READER_KEY, "scopes": ["a2a", "memory:read"]},
        {"name": "talker", "key": TALKER_KEY, "scopes": ["a2a"]},
        {
            "name": "admin",
            "key": ADMIN_KEY,
            "scopes": ["memory:read", "memory:write", "memory:admin"],
        },
    ]
)
FACT = "My dog is called Biscuit."
MEMORIES = "/api/v1/personas/socrates/memories"


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def database(kind: str) -> dict[str, Any]:
    return {"database_url": await migrated_postgres()} if kind == "postgresql" else {}


def caller(hub: Hub, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=hub.settings.base_url, headers=bearer(key), timeout=30)


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_caller_manages_its_memories_and_never_sees_another_callers(
    hub_factory: HubFactory, llm: FakeLLM, kind: str
) -> None:
    async with (
        hub_factory(memory=True, api_keys=KEYS, **await database(kind)) as hub,
        caller(hub, ALICE_KEY) as alice,
        caller(hub, BOB_KEY) as bob,
    ):
        llm.script(Reply("A fine name."), Reply("Noted, the cat."))
        task = await send(await hub.client("socrates", http=alice), FACT)
        await send(await hub.client("socrates", http=alice), "My cat is called Tom.")

        listed = (await alice.get(MEMORIES)).json()
        assert listed["caller"] == "key:alice"
        texts = [item["text"] for item in listed["items"]]
        assert texts == ["Noted, the cat.", "My cat is called Tom.", "A fine name.", FACT]
        assert listed["next"] is None
        fact = listed["items"][3]
        assert (fact["role"], fact["contextId"]) == ("user", task.context_id)

        # Pages, newest first: each next is the previous page's last id.
        first = (await alice.get(MEMORIES, params={"limit": 3})).json()
        assert [item["text"] for item in first["items"]] == texts[:3]
        rest = (await alice.get(MEMORIES, params={"limit": 3, "before": first["next"]})).json()
        assert [item["text"] for item in rest["items"]] == [FACT]
        assert rest["next"] is None

        found = (await alice.get(f"{MEMORIES}/search", params={"q": "Biscuit"})).json()
        assert found["items"][0]["text"] == FACT

        # Bob: none of it, and Alice's ids are as unknown as ids that were never given.
        assert (await bob.get(MEMORIES)).json()["items"] == []
        assert (await bob.get(f"{MEMORIES}/search", params={"q": "Biscuit"})).json()["items"] == []
        mine = f"{MEMORIES}/{fact['id']}"
        for response in (
            await bob.get(mine),
            await bob.patch(mine, json={"text": "My dog is called Rex."}),
            await bob.delete(mine),
            await alice.get(f"{MEMORIES}/999999"),
        ):
            assert response.status_code == 404
            assert response.json()["detail"].startswith("No memory ")
        assert (await alice.get(mine)).json()["text"] == FACT  # untouched by Bob

        assert (await alice.delete(mine)).status_code == 204
        assert (await alice.get(mine)).status_code == 404
        assert (await alice.delete(mine)).status_code == 404
        assert FACT not in [item["text"] for item in (await alice.get(MEMORIES)).json()["items"]]


async def test_an_edited_memory_reaches_the_next_prompt_by_its_new_text(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(memory=True, api_keys=KEYS) as hub, caller(hub, ALICE_KEY) as alice:
        llm.script(Reply("A fine name."), Reply("Rex, you said."))
        await send(await hub.client("socrates", http=alice), FACT)
        old = next(i for i in (await alice.get(MEMORIES)).json()["items"] if i["role"] == "user")

        edited = await alice.patch(
            f"{MEMORIES}/{old['id']}", json={"text": "My dog is called Rex."}
        )
        assert edited.status_code == 200
        new = edited.json()
        assert new["id"] > old["id"]  # a new row, so a cache of the scope sees the change
        assert (new["text"], new["role"], new["contextId"]) == (
            "My dog is called Rex.",
            "user",
            old["contextId"],
        )
        assert (await alice.get(f"{MEMORIES}/{old['id']}")).status_code == 404

        await send(await hub.client("socrates", http=alice), "What is the name of my dog?")
        prompt = system_prompt(llm.requests[-1])
        assert REMEMBERED_HEADING in prompt
        assert "The user said: My dog is called Rex." in prompt
        assert "Biscuit" not in json.dumps(llm.requests[-1])

        for bad in ({"text": ""}, {"text": " \n "}, {"text": "x" * 4001}, {}):
            assert (await alice.patch(f"{MEMORIES}/{new['id']}", json=bad)).status_code == 422


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_an_export_round_trips_what_was_remembered(
    hub_factory: HubFactory, llm: FakeLLM, kind: str
) -> None:
    said = [(FACT, "A fine name."), ("I live in Lyon.", "A city of lights.")]
    async with (
        hub_factory(memory=True, api_keys=KEYS, **await database(kind)) as hub,
        caller(hub, ALICE_KEY) as alice,
    ):
        llm.script(*(Reply(answer) for _, answer in said))
        contexts = [
            (await send(await hub.client("socrates", http=alice), told)).context_id
            for told, _ in said
        ]
        exported = await alice.get(f"{MEMORIES}/export")
        lines = await alice.get(f"{MEMORIES}/export", params={"format": "jsonl"})

    assert exported.headers["content-type"] == "application/json"
    document = exported.json()
    assert (document["persona"], document["caller"]) == ("socrates", "key:alice")
    remembered = [
        (context, role, text)
        for context, pair in zip(contexts, said, strict=True)
        for role, text in zip(("user", "assistant"), pair, strict=True)
    ]
    got = [(m["contextId"], m["role"], m["text"]) for m in document["memories"]]
    assert got == remembered  # oldest first, every one, as said
    assert lines.headers["content-type"] == "application/x-ndjson"
    assert [json.loads(line) for line in lines.text.splitlines()] == document["memories"]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_the_right_to_be_forgotten_deletes_everything_of_a_caller_and_is_audited(
    hub_factory: HubFactory, llm: FakeLLM, kind: str, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    settings = {"memory": True, "api_keys": KEYS, "audit_log": str(log), **await database(kind)}
    async with (
        hub_factory(**settings) as hub,
        caller(hub, ALICE_KEY) as alice,
        caller(hub, BOB_KEY) as bob,
        caller(hub, ADMIN_KEY) as admin,
    ):
        llm.script(Reply("A fine name."), Reply("Solitude suits."), Reply("Bob noted."))
        socrates = await hub.client("socrates", http=alice)
        told = await send(socrates, FACT)
        await send(await hub.client("hermit", http=alice), "I like quiet.")
        await send(await hub.client("socrates", http=bob), "My dog is called Bob Junior.")

        forgotten = await alice.delete("/api/v1/memories")
        assert forgotten.status_code == 200
        assert forgotten.json() == {
            "caller": "key:alice",
            "memories": 4,  # two turns, two messages each
            "conversations": 2,
            "messages": 4,
            "tasks": 2,
            "documents": 0,  # the forgetting of documents: tests/memory/test_forgetting_a_caller.py
            "userPersonas": 0,  # tests/integration/test_user_personas.py
        }
        assert (await alice.get(MEMORIES)).json()["items"] == []
        assert (await alice.get("/api/v1/personas/hermit/memories")).json()["items"] == []
        with pytest.raises(REFUSED):  # the task is gone
            await socrates.get_task(GetTaskRequest(id=told.id))
        llm.script(Reply("Who?"))
        await send(socrates, "What is the name of my dog?", told.context_id)
        assert "Biscuit" not in json.dumps(llm.requests[-1])  # neither history nor memory

        # Bob's are whole, until the operator forgets him.
        assert len((await bob.get(MEMORIES)).json()["items"]) == 2
        by_admin = await admin.delete("/api/v1/memories", params={"caller": "key:bob"})
        assert by_admin.json()["memories"] == 2
        assert (await bob.get(MEMORIES)).json()["items"] == []

    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    forgets = [e for e in events if e["action"] == "memory.forget"]
    assert [(e["principal"], e["caller"], e["memories"], e["tasks"]) for e in forgets] == [
        ("key:alice", "key:alice", 4, 2),
        ("key:admin", "key:bob", 2, 1),
    ]
    assert forgets[0]["messages"] == 4
    assert forgets[0]["outcome"] == "ok"


async def test_memory_routes_need_their_scopes_and_another_caller_needs_memory_admin(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with (
        hub_factory(memory=True, api_keys=KEYS) as hub,
        caller(hub, ALICE_KEY) as alice,
        caller(hub, READER_KEY) as reader,
        caller(hub, TALKER_KEY) as talker,
        caller(hub, ADMIN_KEY) as admin,
    ):
        llm.script(Reply("A fine name."), Reply("Read."))
        await send(await hub.client("socrates", http=alice), FACT)
        await send(await hub.client("socrates", http=reader), "I read a lot.")
        anonymous = await hub.http.get(MEMORIES)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        assert (await hub.http.delete("/api/v1/memories")).status_code == 401

        # Without memory:read, nothing; with it alone, reading only.
        refused = await talker.get(MEMORIES)
        assert refused.status_code == 403
        assert "memory:read" in refused.json()["detail"]
        own = (await reader.get(MEMORIES)).json()["items"]
        assert [item["text"] for item in own] == ["Read.", "I read a lot."]
        assert (await reader.delete(f"{MEMORIES}/{own[0]['id']}")).status_code == 403
        assert (await reader.delete("/api/v1/memories")).status_code == 403
        assert (await reader.get(f"{MEMORIES}/export")).status_code == 200

        # Naming another caller needs memory:admin.
        named = await alice.get(MEMORIES, params={"caller": "key:reader"})
        assert named.status_code == 403
        assert "memory:admin" in named.json()["detail"]
        assert (await alice.get(MEMORIES, params={"caller": "key:alice"})).status_code == 200
        of_alice = (await admin.get(MEMORIES, params={"caller": "key:alice"})).json()
        assert [item["text"] for item in of_alice["items"]] == ["A fine name.", FACT]
        assert (await admin.get(MEMORIES)).json()["items"] == []  # its own: none


async def test_bad_ids_pages_and_personas_are_clear_client_errors(
    hub_factory: HubFactory,
) -> None:
    async with hub_factory(memory=True, api_keys=KEYS) as hub, caller(hub, ALICE_KEY) as alice:
        for path, params in (
            (MEMORIES, {"limit": 0}),
            (MEMORIES, {"limit": 501}),
            (MEMORIES, {"before": "soon"}),
            (MEMORIES, {"before": 0}),
            (f"{MEMORIES}/abc", {}),
            (f"{MEMORIES}/0", {}),
            (f"{MEMORIES}/search", {}),
            (f"{MEMORIES}/export", {"format": "xml"}),
            (MEMORIES, {"caller": ""}),
        ):
            response = await alice.get(path, params=params)
            assert response.status_code == 422, (path, params, response.text)
        unknown = await alice.get("/api/v1/personas/nobody/memories")
        assert unknown.status_code == 404
        assert "nobody" in unknown.json()["detail"]


async def test_with_memory_off_memories_are_listed_and_forgotten_not_searched(
    hub_factory: HubFactory,
) -> None:
    async with hub_factory(api_keys=KEYS) as hub, caller(hub, ALICE_KEY) as alice:
        assert (await alice.get(MEMORIES)).json()["items"] == []
        off = await alice.get(f"{MEMORIES}/search", params={"q": "dog"})
        assert off.status_code == 409
        assert "PERSONA_AGENT_MEMORY=on" in off.json()["detail"]
        assert (await alice.delete("/api/v1/memories")).json()["memories"] == 0


async def test_a_hub_without_keys_asks_whose_memory(hub_factory: HubFactory) -> None:
    async with hub_factory(memory=True) as hub:
        unnamed = await hub.http.get(MEMORIES)
        assert unnamed.status_code == 400
        assert "caller=" in unnamed.json()["detail"]
        named = await hub.http.get(MEMORIES, params={"caller": "key:alice"})
        assert named.json() == {
            "persona": "socrates",
            "caller": "key:alice",
            "items": [],
            "next": None,
        }


async def test_the_memory_commands_list_export_and_forget(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(memory=True, api_keys=KEYS) as hub, caller(hub, ALICE_KEY) as alice:
        llm.script(Reply("A fine name."))
        await send(await hub.client("socrates", http=alice), FACT)
        env = {"PERSONA_AGENT_URL": hub.settings.base_url, "PERSONA_AGENT_API_KEY": ALICE_KEY}

        def memory(*args: str, stdin: str | None = None) -> Result:
            # In a thread: the command's HTTP calls are synchronous, the hub is in this loop.
            return CliRunner().invoke(app, ["memory", *args], env=env, input=stdin)

        listed = await asyncio.to_thread(memory, "list", "socrates")
        assert listed.exit_code == 0, listed.output
        lines = listed.output.splitlines()
        assert [line.split()[1] for line in lines] == ["assistant", "user"]
        assert lines[1].endswith(FACT)

        exported = await asyncio.to_thread(memory, "export", "socrates", "--format", "jsonl")
        assert [json.loads(line)["text"] for line in exported.output.splitlines()] == [
            FACT,
            "A fine name.",
        ]
        other = await asyncio.to_thread(memory, "list", "socrates", "--caller", "key:bob")
        assert other.exit_code == 1
        assert "403" in other.output
        assert "memory:admin" in other.output

        kept = await asyncio.to_thread(memory, "forget", stdin="n\n")
        assert kept.exit_code == 1  # aborted: nothing deleted
        assert len((await alice.get(MEMORIES)).json()["items"]) == 2
        forgot = await asyncio.to_thread(memory, "forget", "--yes")
        assert forgot.exit_code == 0, forgot.output
        assert forgot.output.strip() == (
            "Forgot key:alice: 2 memories, 1 conversations (2 messages), 1 tasks"
        )
        assert (await alice.get(MEMORIES)).json()["items"] == []
