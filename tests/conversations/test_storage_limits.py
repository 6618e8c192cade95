"""The conversation doors attacked through real HTTP (issue 46, docs/conversations.md,
"Storage quotas"): forks and imports past a caller's storage quota are refused with a 409
naming the limit while another caller's go on; REST writes spend the caller's A2A
request bucket; an answer keeps 100 alternatives however many regenerations come; a
hub without keys never lists anonymous conversations (one is still read by its id); a
hostile chat file is a 422 naming the problem. On SQLite, and on PostgreSQL where the
database matters."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from persona_agent.conversations.files.json_chat import FORMAT
from tests.conftest import migrated_postgres
from tests.conversations.conftest import HubApp
from tests.fakes.fake_llm import FakeLLM, Reply

BASE = "/api/v1/conversations"
IMPORT = f"{BASE}/import"
ALICE = {"Authorization": "Bearer alice-key-0123456789abcdef"}
BOB = {"Authorization": "Bearer bob-key-0123456789abcdef00"}
KEYS = json.dumps(
    [
        {"name": "alice", "key": "alice-key-0123456789abcdef"},
        {"name": "bob", "key": "bob-key-0123456789abcdef00"},
    ]
)
UPLOAD = {"X-Requested-With": "test"}


async def database(kind: str) -> dict[str, Any]:
    return {"database_url": await migrated_postgres()} if kind == "postgresql" else {}


def chat_file(messages: int, size: int, *, swipes: int = 0) -> bytes:
    """The hub's JSON chat file: ``messages`` of ``size`` characters, the last answer
    with ``swipes`` alternatives (the last one selected)."""
    items: list[dict[str, Any]] = [
        {"role": ("user", "assistant")[i % 2], "content": f"{i:04d}" + "x" * size}
        for i in range(messages)
    ]
    if swipes:
        texts = [f"alternative {n}" for n in range(swipes - 1)] + [items[-1]["content"]]
        items[-1]["swipes"] = {"selected": swipes - 1, "texts": texts}
    return json.dumps({"format": FORMAT, "messages": items}).encode()


async def upload(
    http: httpx.AsyncClient, data: bytes, headers: dict[str, str] | None = None, **params: str
) -> httpx.Response:
    return await http.post(
        IMPORT,
        params={"persona_id": "gwen", "format": "json", **params},
        files={"file": ("chat.json", data, "application/json")},
        headers={**UPLOAD, **(headers or {})},
    )


async def fork(
    http: httpx.AsyncClient, context_id: str, message_id: int, headers: dict[str, str]
) -> httpx.Response:
    return await http.post(
        f"{BASE}/gwen/{context_id}/fork", json={"message_id": message_id}, headers=headers
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_forks_past_the_callers_bytes_are_refused_and_anothers_go_on(
    start_hub: HubApp, kind: str
) -> None:
    limits = {"caller_max_message_bytes": 50_000, "caller_max_messages": 0}
    async with start_hub(api_keys=KEYS, **limits, **await database(kind)) as http:
        imported = await upload(http, chat_file(10, 2000), ALICE, context_id="big")
        assert imported.status_code == 201, imported.text  # some 20 KB
        last = imported.json()["messages"][-1]["id"]
        assert (await fork(http, "big", last, ALICE)).status_code == 201  # some 40 KB
        refused = await fork(http, "big", last, ALICE)  # would be some 60 KB
        assert refused.status_code == 409, refused.text
        detail = refused.json()["detail"]
        assert "PERSONA_AGENT_CALLER_MAX_MESSAGE_BYTES" in detail
        assert "50,000" in detail
        again = await upload(http, chat_file(10, 2000), ALICE)  # an import is held alike
        assert again.status_code == 409, again.text
        # Another caller has a quota of its own.
        theirs = await upload(http, chat_file(10, 2000), BOB, context_id="big")
        assert theirs.status_code == 201, theirs.text
        bobs_last = theirs.json()["messages"][-1]["id"]
        assert (await fork(http, "big", bobs_last, BOB)).status_code == 201
        # Deleting makes room at once (the caller is counted again).
        mine = (await http.get(f"{BASE}/gwen/big", headers=ALICE)).json()
        assert len(mine["messages"]) == 10  # nothing of the refused writes was stored
        assert (await http.delete(f"{BASE}/gwen/big", headers=ALICE)).status_code == 204
        assert (await upload(http, chat_file(10, 2000), ALICE)).status_code == 201


async def test_conversations_past_the_callers_count_are_refused(start_hub: HubApp) -> None:
    async with start_hub(api_keys=KEYS, caller_max_conversations=2) as http:
        for context_id in ("one", "two"):
            opened = await http.post(
                BASE, json={"persona_id": "gwen", "context_id": context_id}, headers=ALICE
            )
            assert opened.status_code == 201, opened.text
        third = await http.post(BASE, json={"persona_id": "gwen"}, headers=ALICE)
        assert third.status_code == 409, third.text
        assert "PERSONA_AGENT_CALLER_MAX_CONVERSATIONS" in third.json()["detail"]
        greeting = (await http.get(f"{BASE}/gwen/one", headers=ALICE)).json()["messages"][0]
        assert (await fork(http, "one", greeting["id"], ALICE)).status_code == 409
        assert (await http.post(BASE, json={"persona_id": "gwen"}, headers=BOB)).status_code == 201


async def test_rest_writes_spend_the_callers_a2a_requests(start_hub: HubApp) -> None:
    async with start_hub(api_keys=KEYS, rate_limit=3) as http:
        opened = await http.post(BASE, json={"persona_id": "gwen", "context_id": "c"}, headers=BOB)
        assert opened.status_code == 201
        mine = await http.post(BASE, json={"persona_id": "gwen", "context_id": "c"}, headers=ALICE)
        greeting = mine.json()["messages"][0]["id"]
        answers = [(await fork(http, "c", greeting, ALICE)).status_code for _ in range(4)]
        assert answers == [201, 201, 429, 429], answers  # 3 a minute in all, the start one
        refused = await fork(http, "c", greeting, ALICE)
        assert int(refused.headers["Retry-After"]) >= 1
        assert "PERSONA_AGENT_RATE_LIMIT" in refused.json()["detail"]
        # The same bucket as A2A: the caller's next message is refused there too.
        a2a = await http.post(
            "/a2a/gwen/",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}},
            headers={**ALICE, "A2A-Version": "1.0"},
        )
        assert a2a.status_code == 429, a2a.text
        # Another caller's bucket is its own.
        assert (await fork(http, "c", opened.json()["messages"][0]["id"], BOB)).status_code == 201


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_an_answer_keeps_100_alternatives_however_many_regenerations(
    start_hub: HubApp, llm: FakeLLM, kind: str
) -> None:
    async with start_hub(**await database(kind)) as http:
        imported = await upload(http, chat_file(2, 10, swipes=100), context_id="many")
        assert imported.status_code == 201, imported.text
        swipes = imported.json()["messages"][-1]["swipes"]
        assert (swipes["count"], swipes["selected"]) == (100, 99)
        for number in range(3):
            llm.script(Reply(f"regenerated {number}"))
            answer = await http.post(f"{BASE}/gwen/many/regenerate", json={})
            assert answer.status_code == 200, answer.text
        swipes = answer.json()["conversation"]["messages"][-1]["swipes"]
        assert (swipes["count"], swipes["selected"]) == (100, 99)
        texts = swipes["texts"]
        # The three oldest went; the imported selected one and the new ones stayed.
        assert texts[0] == "alternative 3"
        assert "alternative 2" not in texts
        assert texts[-4:] == [
            imported.json()["messages"][-1]["content"],
            "regenerated 0",
            "regenerated 1",
            "regenerated 2",
        ]
        anchor = swipes["anchor"]
        chosen = await http.put(f"{BASE}/gwen/many/swipes/{anchor}", json={"selected": 0})
        assert chosen.json()["messages"][-1]["content"] == "alternative 3"  # renumbered from 0
        forked = await fork(http, "many", chosen.json()["messages"][-1]["id"], {})
        assert forked.json()["messages"][-1]["swipes"]["count"] == 100


async def test_a_keyless_hub_never_lists_anonymous_conversations(
    start_hub: HubApp, llm: FakeLLM
) -> None:
    async with start_hub() as http:
        opened = await http.post(BASE, json={"persona_id": "gwen", "context_id": "MRN-77123"})
        assert opened.status_code == 201
        for params in ({"persona_id": "gwen"}, {"persona_id": "gwen", "caller": "key:alice"}):
            listed = await http.get(BASE, params=params)
            assert listed.status_code == 403, listed.text
            assert "MRN-77123" not in listed.text
            assert "context id" in listed.json()["detail"]
        # Whoever knows the id still reads (and continues) it, as over A2A.
        read = await http.get(f"{BASE}/gwen/MRN-77123")
        assert read.status_code == 200
        assert read.json()["context_id"] == "MRN-77123"


async def test_an_identified_caller_lists_its_own(start_hub: HubApp) -> None:
    async with start_hub(api_keys=KEYS) as http:
        await http.post(BASE, json={"persona_id": "gwen", "context_id": "a1"}, headers=ALICE)
        await http.post(BASE, json={"persona_id": "gwen", "context_id": "b1"}, headers=BOB)
        listed = await http.get(BASE, params={"persona_id": "gwen"}, headers=ALICE)
        assert [item["context_id"] for item in listed.json()["items"]] == ["a1"]


HOSTILE: list[tuple[str, bytes, str]] = [
    ("json", b'{"format": "' + FORMAT.encode() + b'", "n": ' + b"7" * 5000 + b"}", "4300 digits"),
    ("json", b"[" * 100_000 + b"]" * 100_000, "nested more than 64 deep"),
    ("json", b'{"a":' * 70 + b"1" + b"}" * 70, "nested more than 64 deep"),
    ("sillytavern", b'{"mes": "hi", "extra": ' + b"9" * 5000 + b"}", "line 1: a value"),
    ("sillytavern", b'{"mes": "hi", "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested"),
    ("sillytavern", b'{"mes": "hi", "send_date": "' + b"1" * 5000 + b'"}\n', ""),
    (
        "json",
        b'{"format": "' + FORMAT.encode() + b'", "messages": [{"role": "user", '
        b'"content": "\\ud800"}]}',
        "surrogate",
    ),
]


@pytest.mark.parametrize(("kind", "data", "named"), HOSTILE)
async def test_a_hostile_chat_file_is_a_4xx_naming_the_problem(
    hub: httpx.AsyncClient, kind: str, data: bytes, named: str
) -> None:
    response = await upload(hub, data, format=kind)
    if not named:  # an unreadable date is no date: imported (stamped now), not a 500
        assert response.status_code == 201, response.text
        assert response.json()["messages"][0]["content"] == "hi"
        return
    assert response.status_code == 422, response.text
    assert named in response.json()["detail"]
