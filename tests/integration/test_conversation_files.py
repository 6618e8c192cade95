"""Chats that move (docs/conversations.md, "Moving chats"), through the real hub over HTTP:
a SillyTavern chat file is imported with every message and swipe, continues over A2A where
it stopped (the scripted LLM's prompt holds its history), and is exported again as
SillyTavern JSONL, the hub's JSON and Markdown; a broken file is a 422 naming the line and
the field, and nothing is stored; another caller's conversation is not found. On SQLite,
and on PostgreSQL when one answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from persona_agent.conversations.files.chat_file import MAX_FILE_BYTES
from tests.conftest import migrated_postgres
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import answer_text, send
from tests.integration.conftest import Hub, HubFactory

MARA = Path(__file__).parents[1] / "conversations" / "data" / "captain_mara.jsonl"
IMPORT = "/api/v1/conversations/import"
EXPORT = "/api/v1/conversations/socrates"
UPLOAD = {"X-Requested-With": "test"}
ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef00"
TALKER_KEY = "a2a-only-key-0123456789abc"
ELSEWHERE_KEY = "ada-only-key-0123456789abc"
KEYS = json.dumps(
    [
        {"name": "alice", "key": ALICE_KEY},
        {"name": "bob", "key": BOB_KEY},
        {"name": "talker", "key": TALKER_KEY, "scopes": ["a2a"]},
        {"name": "elsewhere", "key": ELSEWHERE_KEY, "personas": ["ada-lovelace"]},
    ]
)


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): one
    test calls a tool, on a hub of its own with them (``mcp_servers_file``), and each stdio
    server is a process of about 1 s of CPU."""
    return None


async def database(kind: str) -> dict[str, Any]:
    return {"database_url": await migrated_postgres()} if kind == "postgresql" else {}


async def upload(
    http: httpx.AsyncClient, data: bytes, name: str = "chat.jsonl", **params: str
) -> httpx.Response:
    return await http.post(
        IMPORT,
        params={"persona_id": "socrates", **params},
        files={"file": (name, data, "application/octet-stream")},
        headers=UPLOAD,
    )


def lines_of(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode().split("\n") if line.strip()]


def texts(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    return [(message["role"], message["content"]) for message in conversation["messages"]]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_an_imported_chat_keeps_its_swipes_continues_and_exports_again(
    hub_factory: HubFactory, llm: FakeLLM, kind: str
) -> None:
    original = lines_of(MARA.read_bytes())
    kept = [line for line in original[1:] if not line["is_system"]]
    async with hub_factory(**await database(kind)) as hub:
        response = await upload(hub.http, MARA.read_bytes(), "captain_mara.jsonl")
        assert response.status_code == 201, response.text
        conversation = response.json()
        context_id = conversation["context_id"]
        assert texts(conversation) == [
            ("user" if line["is_user"] else "assistant", line["mes"]) for line in kept
        ]
        greeting, answer = conversation["messages"][0], conversation["messages"][2]
        assert greeting["swipes"]["count"] == 3
        assert greeting["swipes"]["selected"] == 0
        assert answer["swipes"]["texts"] == original[3]["swipes"]
        assert answer["swipes"]["selected"] == 1
        assert conversation["messages"][0]["at"].startswith("2026-11-20T21:04")

        # It continues where it stopped: the model is shown the imported selected branch.
        llm.script(Reply("We sail at dawn, then."))
        client = await hub.client("socrates")
        task = await send(client, "Is the cook friendly?", context_id)
        assert answer_text(task) == "We sail at dawn, then."
        prompt = [(m["role"], m["content"]) for m in llm.requests[-1]["messages"][1:]]
        assert prompt[-1] == ("user", "Is the cook friendly?")
        history = [pair for pair in prompt if pair[1] in {line["mes"] for line in kept}]
        assert history == texts(conversation)
        assert "Passage isn't cheap, and the isles aren't friendly. Why go?" not in str(prompt)

        # Exported again as SillyTavern JSONL: every message and swipe, and the new turn.
        base = f"/api/v1/conversations/socrates/{context_id}/export"
        exported = await hub.http.get(base, params={"format": "sillytavern"})
        assert exported.status_code == 200
        assert exported.headers["content-type"].startswith("application/jsonl")
        assert "attachment" in exported.headers["content-disposition"]
        lines = lines_of(exported.content)
        assert lines[0]["character_name"] == "Socrates"
        assert [line["mes"] for line in lines[1:]] == [
            *(line["mes"] for line in kept),
            "Is the cook friendly?",
            "We sail at dawn, then.",
        ]
        assert lines[1]["swipes"] == original[1]["swipes"]
        assert lines[3]["swipes"] == original[3]["swipes"]
        assert lines[3]["swipe_id"] == 1

        # The hub's JSON file round-trips into a new conversation, context id chosen.
        as_json = await hub.http.get(base, params={"format": "json"})
        assert as_json.headers["content-type"].startswith("application/json")
        again = await upload(
            hub.http, as_json.content, "chat.json", format="json", context_id="copy-1"
        )
        assert again.status_code == 201, again.text
        copy = again.json()
        assert copy["context_id"] == "copy-1"
        assert texts(copy) == [(m["role"], m["content"]) for m in as_json.json()["messages"]]
        assert texts(copy)[-2:] == [
            ("user", "Is the cook friendly?"),
            ("assistant", "We sail at dawn, then."),
        ]
        assert copy["messages"][2]["swipes"]["texts"] == original[3]["swipes"]

        markdown = await hub.http.get(base, params={"format": "markdown"})
        assert markdown.headers["content-type"].startswith("text/markdown")
        assert "(alternative 2 of 3)" in markdown.text
        assert "We sail at dawn, then." in markdown.text


async def test_a_broken_file_is_a_422_naming_the_line_and_nothing_is_stored(hub: Hub) -> None:
    broken = MARA.read_bytes().replace(b'"is_user": true', b'"is_user": "yes"', 1)
    response = await upload(hub.http, broken, context_id="broken-1")
    assert response.status_code == 422
    assert response.json()["detail"] == 'line 3: "is_user" must be true or false'
    assert (await hub.http.get(f"{EXPORT}/broken-1/export")).status_code == 404
    too_large = b"\n" * (MAX_FILE_BYTES + 1)
    assert (await upload(hub.http, too_large)).status_code == 413
    for data, params, status in [
        (b'{"format": "other"}', {"format": "json"}, 422),
        (b"\xff", {}, 422),
        (MARA.read_bytes(), {"format": "yaml"}, 422),
        (MARA.read_bytes(), {"persona_id": "nobody"}, 404),
    ]:
        assert (await upload(hub.http, data, **params)).status_code == status, params
    # a context id that is taken is a 409; the conversation there is untouched
    assert (await upload(hub.http, MARA.read_bytes(), context_id="taken")).status_code == 201
    taken = await upload(hub.http, b'{"mes": "hi", "is_user": true}', context_id="taken")
    assert taken.status_code == 409
    assert taken.json()["detail"] == "A conversation with this context id exists already"
    there = await hub.http.get(f"{EXPORT}/taken/export", params={"format": "json"})
    assert len(there.json()["messages"]) == 5
    # the broken file's context id is free: nothing was stored there
    assert (await upload(hub.http, MARA.read_bytes(), context_id="broken-1")).status_code == 201


async def test_another_callers_conversation_is_not_found(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(api_keys=KEYS) as hub:
        alice = {"Authorization": f"Bearer {ALICE_KEY}"}
        bob = {"Authorization": f"Bearer {BOB_KEY}"}
        response = await hub.http.post(
            IMPORT,
            params={"persona_id": "socrates", "context_id": "mine"},
            files={"file": ("c.jsonl", MARA.read_bytes())},
            headers=alice,
        )
        assert response.status_code == 201, response.text
        path = "/api/v1/conversations/socrates/mine/export"
        assert (await hub.http.get(path, headers=alice)).status_code == 200
        assert (await hub.http.get(path, headers=bob)).status_code == 404
        assert (await hub.http.get(path)).status_code == 401
        # Bob's own "mine" is another conversation
        response = await hub.http.post(
            IMPORT,
            params={"persona_id": "socrates", "context_id": "mine"},
            files={"file": ("c.jsonl", b'{"mes": "hello", "is_user": true}')},
            headers=bob,
        )
        assert response.status_code == 201, response.text
        assert len((await hub.http.get(path, headers=alice)).content.splitlines()) == 6
        # Each continues their own over A2A: Alice's prompt holds her imported chat only.
        async with httpx.AsyncClient(
            base_url=hub.settings.base_url, headers=alice, timeout=30
        ) as http:
            llm.script(Reply("Aye."))
            await send(await hub.client("socrates", http=http), "Ready?", "mine")
        shown = [m["content"] for m in llm.requests[-1]["messages"]]
        assert shown[-2:] == [lines_of(MARA.read_bytes())[-1]["mes"], "Ready?"]
        assert "hello" not in shown
        # A key without the memory scopes, or limited to other personas: 403, nothing stored.
        for key in (TALKER_KEY, ELSEWHERE_KEY):
            headers = {"Authorization": f"Bearer {key}"}
            assert (await hub.http.get(path, headers=headers)).status_code == 403
            refused = await hub.http.post(
                IMPORT,
                params={"persona_id": "socrates", "context_id": "theirs"},
                files={"file": ("c.jsonl", MARA.read_bytes())},
                headers=headers,
            )
            assert refused.status_code == 403


async def test_tool_calls_move_in_the_hubs_json_and_stay_out_of_sillytavern(
    hub_factory: HubFactory, llm: FakeLLM, mcp_servers_file: Path
) -> None:
    async with hub_factory(mcp_config=mcp_servers_file) as hub:
        llm.script(ToolCalls([("local__add", {"a": 2, "b": 40})]), Reply("It is 42."))
        task = await send(await hub.client("toolsmith"), "What is 2 + 40?")
        base = f"/api/v1/conversations/toolsmith/{task.context_id}/export"
        as_json = (await hub.http.get(base, params={"format": "json"})).json()
        roles = [message["role"] for message in as_json["messages"]]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert as_json["messages"][1]["tool_calls"][0]["function"]["name"] == "local__add"
        assert as_json["messages"][2]["content"] == "42"
        assert as_json["character_name"] == "Tess the Toolsmith"
        tavern = lines_of((await hub.http.get(base)).content)
        assert [(line["is_user"], line["mes"]) for line in tavern[1:]] == [
            (True, "What is 2 + 40?"),
            (False, "It is 42."),
        ]
        # The JSON file comes back with its tool call and result, and the chat goes on.
        data = json.dumps(as_json).encode()
        response = await hub.http.post(
            IMPORT,
            params={"persona_id": "toolsmith", "format": "json", "context_id": "sums"},
            files={"file": ("sums.json", data)},
            headers=UPLOAD,
        )
        assert response.status_code == 201, response.text
        assert [m["role"] for m in response.json()["messages"]] == roles
        llm.script(Reply("Still 42."))
        await send(await hub.client("toolsmith"), "And again?", "sums")
        prompt = llm.requests[-1]["messages"]
        assert [m["role"] for m in prompt[-5:]] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]
        assert prompt[-3]["tool_call_id"] == prompt[-4]["tool_calls"][0]["id"]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_regenerated_answer_goes_to_sillytavern_as_swipes_and_comes_back(
    hub_factory: HubFactory, llm: FakeLLM, kind: str
) -> None:
    async with hub_factory(**await database(kind)) as hub:
        llm.script(Reply("Know thyself."), Reply("Question everything."))
        task = await send(await hub.client("socrates"), "Any advice?")
        base = f"/api/v1/conversations/socrates/{task.context_id}"
        again = await hub.http.post(f"{base}/regenerate", json={})
        assert again.status_code == 200, again.text
        assert again.json()["answer"] == "Question everything."
        lines = lines_of((await hub.http.get(f"{base}/export")).content)
        assert [line["mes"] for line in lines[1:]] == ["Any advice?", "Question everything."]
        assert lines[2]["swipes"] == ["Know thyself.", "Question everything."]
        assert lines[2]["swipe_id"] == 1
        # SillyTavern's file comes back with the same alternatives, and one can be chosen.
        data = "\n".join(json.dumps(line) for line in lines).encode()
        imported = await upload(hub.http, data, context_id="advice")
        assert imported.status_code == 201, imported.text
        answer = imported.json()["messages"][1]
        assert answer["swipes"]["texts"] == ["Know thyself.", "Question everything."]
        assert answer["swipes"]["selected"] == 1
        anchor = answer["swipes"]["anchor"]
        chosen = await hub.http.put(
            f"/api/v1/conversations/socrates/advice/swipes/{anchor}", json={"selected": 0}
        )
        assert chosen.status_code == 200, chosen.text
        assert chosen.json()["messages"][1]["content"] == "Know thyself."
        back = lines_of(
            (await hub.http.get("/api/v1/conversations/socrates/advice/export")).content
        )
        assert back[2]["mes"] == "Know thyself."
        assert back[2]["swipe_id"] == 0
