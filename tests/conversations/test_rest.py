"""The conversation routes through real HTTP (docs/conversations.md): regenerate (the model
shown exactly the selected branch), swipe, continue, edit, delete, fork, a chosen greeting;
another caller's conversation, an unknown message, a deleted one: 404, nothing changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import yaml
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card

from tests.conversations.conftest import GREETER, HubApp
from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send

BASE = "/api/v1/conversations"
NUDGE = "[Continue your last message without repeating its original content.]"


async def say(http: httpx.AsyncClient, context_id: str, text: str) -> str:
    """A message over A2A (a real a2a-sdk client, JSON-RPC), as a chat client sends it."""
    card = parse_agent_card((await http.get("/a2a/gwen/.well-known/agent-card.json")).json())
    config = ClientConfig(
        httpx_client=http, supported_protocol_bindings=["JSONRPC"], streaming=False
    )
    client = ClientFactory(config).create(card)
    return answer_text(await send(client, text, context_id))


def shown(llm: FakeLLM, index: int = -1) -> list[tuple[str, str]]:
    """What the model was shown in a request, after the system prompt."""
    messages = llm.requests[index]["messages"]
    return [(m["role"], m["content"]) for m in messages[1:]]


def texts(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in conversation["messages"]]


async def start(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await http.post(BASE, json={"persona_id": "gwen", **body})
    assert response.status_code == 201, response.text
    conversation: dict[str, Any] = response.json()
    return conversation


async def test_regenerate_shows_the_selected_branch_and_keeps_the_old_answer(
    hub: httpx.AsyncClient, llm: FakeLLM
) -> None:
    opened = await start(hub, greeting=1, context_id="c1")
    assert texts(opened) == [("assistant", "Good morning!")]
    assert opened["greetings"] == ["Hello, User!", "Good morning!", "Well met."]
    assert opened["messages"][0]["swipes"] == {
        "anchor": 0,
        "selected": 1,
        "count": 3,
        "texts": ["Hello, User!", "Good morning!", "Well met."],
    }
    llm.script(Reply("a1"), Reply("a2"), Reply("a2 bis"))
    assert await say(hub, "c1", "q1") == "a1"
    assert await say(hub, "c1", "q2") == "a2"
    response = await hub.post(f"{BASE}/gwen/c1/regenerate", json={})
    assert response.status_code == 200, response.text
    assert response.json()["answer"] == "a2 bis"
    # Exactly the selected branch up to the last user message: not the old answer.
    assert shown(llm) == [
        ("assistant", "Good morning!"),
        ("user", "q1"),
        ("assistant", "a1"),
        ("user", "q2"),
    ]
    conversation = response.json()["conversation"]
    last = conversation["messages"][-1]
    assert (last["content"], last["swipes"]["texts"]) == ("a2 bis", ["a2", "a2 bis"])
    assert (last["swipes"]["selected"], last["swipes"]["anchor"]) == (
        1,
        conversation["messages"][-2]["id"],
    )
    anchor = last["swipes"]["anchor"]
    chosen = await hub.put(f"{BASE}/gwen/c1/swipes/{anchor}", json={"selected": 0})
    assert chosen.status_code == 200, chosen.text
    assert texts(chosen.json())[-1] == ("assistant", "a2")
    llm.script(Reply("a3"))
    assert await say(hub, "c1", "q3") == "a3"  # the next turn goes on from the selected one
    assert shown(llm)[-3:] == [("user", "q2"), ("assistant", "a2"), ("user", "q3")]
    # Anonymous conversations are never listed (docs/conversations.md): opened by id only.
    assert (await hub.get(BASE, params={"persona_id": "gwen"})).status_code == 403
    assert len((await hub.get(f"{BASE}/gwen/c1")).json()["messages"]) == 7


async def test_continue_adds_to_the_last_answer(hub: httpx.AsyncClient, llm: FakeLLM) -> None:
    llm.script(Reply("Once upon"), Reply(" a time."))
    await say(hub, "c2", "Tell me a story")
    response = await hub.post(f"{BASE}/gwen/c2/continue", json={})
    assert response.status_code == 200, response.text
    assert response.json()["answer"] == " a time."
    assert texts(response.json()["conversation"])[-1] == ("assistant", "Once upon a time.")
    assert shown(llm)[-3:] == [
        ("user", "Tell me a story"),
        ("assistant", "Once upon"),
        ("system", NUDGE),
    ]


async def test_edit_delete_and_fork(hub: httpx.AsyncClient, llm: FakeLLM) -> None:
    llm.script(Reply("a1"), Reply("a2"))
    await say(hub, "c3", "q1")
    await say(hub, "c3", "q2")
    conversation = (await hub.get(f"{BASE}/gwen/c3")).json()
    ids = [m["id"] for m in conversation["messages"]]  # greeting, q1, a1, q2, a2
    edited = await hub.patch(f"{BASE}/gwen/c3/messages/{ids[2]}", json={"content": "A1!"})
    assert texts(edited.json())[2] == ("assistant", "A1!")
    forked = await hub.post(f"{BASE}/gwen/c3/fork", json={"message_id": ids[2], "context_id": "c4"})
    assert forked.status_code == 201, forked.text
    assert texts(forked.json()) == [
        ("assistant", "Hello, User!"),
        ("user", "q1"),
        ("assistant", "A1!"),
    ]
    assert forked.json()["messages"][0]["swipes"]["count"] == 3  # the greetings came along
    deleted = await hub.delete(f"{BASE}/gwen/c3/messages/{ids[3]}", params={"following": "true"})
    assert [m["id"] for m in deleted.json()["messages"]] == ids[:3]
    llm.script(Reply("again"))
    assert await say(hub, "c4", "q2 in the fork") == "again"
    assert shown(llm)[-2:] == [("assistant", "A1!"), ("user", "q2 in the fork")]
    assert (await hub.delete(f"{BASE}/gwen/c4")).status_code == 204
    assert (await hub.get(f"{BASE}/gwen/c4")).status_code == 404


async def test_bad_input_is_a_4xx_and_changes_nothing(hub: httpx.AsyncClient, llm: FakeLLM) -> None:
    llm.script(Reply("a1"))
    await say(hub, "c5", "q1")
    before = (await hub.get(f"{BASE}/gwen/c5")).json()
    ids = [m["id"] for m in before["messages"]]
    cases: list[tuple[str, str, dict[str, Any], int]] = [
        ("patch", f"{BASE}/gwen/c5/messages/999999", {"json": {"content": "x"}}, 404),
        ("delete", f"{BASE}/gwen/c5/messages/999999", {}, 404),
        ("put", f"{BASE}/gwen/c5/swipes/{ids[1]}", {"json": {"selected": 3}}, 404),
        ("patch", f"{BASE}/gwen/c5/messages/{ids[1]}", {"json": {"content": "  "}}, 422),
        ("post", f"{BASE}/gwen/nothing-here/regenerate", {"json": {}}, 404),
        ("post", f"{BASE}/gwen/c5/fork", {"json": {"message_id": 999999}}, 404),
        ("post", f"{BASE}/nobody/c5/regenerate", {"json": {}}, 404),
        ("post", BASE, {"json": {"persona_id": "gwen", "greeting": 7}}, 422),
        ("post", BASE, {"json": {"persona_id": "gwen", "context_id": "c5"}}, 409),
    ]
    for method, url, options, code in cases:
        response = await getattr(hub, method)(url, **options)
        assert response.status_code == code, (method, url, response.text)
        assert "detail" in response.json()
    # A failed regeneration puts the answer back.
    llm.script(Fail(500))
    failed = await hub.post(f"{BASE}/gwen/c5/regenerate", json={})
    assert failed.status_code == 502, failed.text
    assert (await hub.get(f"{BASE}/gwen/c5")).json() == before
    # A deleted message cannot be forked.
    await hub.delete(f"{BASE}/gwen/c5/messages/{ids[2]}")
    after_delete = (await hub.get(f"{BASE}/gwen/c5")).json()
    refused = await hub.post(
        f"{BASE}/gwen/c5/fork", json={"message_id": ids[2], "context_id": "c6"}
    )
    assert refused.status_code == 404
    assert (await hub.get(f"{BASE}/gwen/c6")).status_code == 404
    assert after_delete["messages"][-1]["role"] == "user"  # q1, its answer deleted


async def test_regenerate_answers_a_message_whose_answer_was_deleted(
    hub: httpx.AsyncClient, llm: FakeLLM
) -> None:
    llm.script(Reply("a1"), Reply("a1 anew"))
    await say(hub, "c7", "q1")
    ids = [m["id"] for m in (await hub.get(f"{BASE}/gwen/c7")).json()["messages"]]
    await hub.delete(f"{BASE}/gwen/c7/messages/{ids[2]}")  # the last answer
    response = await hub.post(f"{BASE}/gwen/c7/regenerate", json={})
    assert response.status_code == 200, response.text
    assert response.json()["answer"] == "a1 anew"
    assert shown(llm)[-1] == ("user", "q1")  # the message left unanswered, asked again
    conversation = response.json()["conversation"]
    assert texts(conversation)[1:] == [("user", "q1"), ("assistant", "a1 anew")]
    assert conversation["messages"][-1].get("swipes") is None  # its first answer: no others
    llm.script(Reply("a2"))
    assert await say(hub, "c7", "q2") == "a2"
    assert shown(llm)[-3:] == [("user", "q1"), ("assistant", "a1 anew"), ("user", "q2")]


KEYS = json.dumps(
    [
        {"name": "alice", "key": "alice-key-0123456789abcdef"},
        {"name": "bob", "key": "bob-key-0123456789abcdef00"},
    ]
)


async def test_another_callers_conversation_is_not_found(start_hub: HubApp) -> None:
    async with start_hub(api_keys=KEYS) as http:
        alice = {"Authorization": "Bearer alice-key-0123456789abcdef"}
        bob = {"Authorization": "Bearer bob-key-0123456789abcdef00"}
        opened = await http.post(
            BASE, json={"persona_id": "gwen", "context_id": "mine"}, headers=alice
        )
        assert opened.status_code == 201, opened.text
        greeting = opened.json()["messages"][0]["id"]
        before = (await http.get(f"{BASE}/gwen/mine", headers=alice)).json()
        calls: list[tuple[str, str, dict[str, Any]]] = [
            ("get", f"{BASE}/gwen/mine", {}),
            ("patch", f"{BASE}/gwen/mine/messages/{greeting}", {"json": {"content": "x"}}),
            ("delete", f"{BASE}/gwen/mine/messages/{greeting}", {}),
            ("put", f"{BASE}/gwen/mine/swipes/0", {"json": {"selected": 1}}),
            ("post", f"{BASE}/gwen/mine/fork", {"json": {"message_id": greeting}}),
            ("delete", f"{BASE}/gwen/mine", {}),
        ]
        for method, url, options in calls:
            response = await getattr(http, method)(url, headers=bob, **options)
            assert response.status_code == 404, (method, url, response.text)
        assert (await http.get(BASE, params={"persona_id": "gwen"}, headers=bob)).json() == {
            "items": []
        }
        assert (await http.get(f"{BASE}/gwen/mine", headers=alice)).json() == before
        assert (await http.get(f"{BASE}/gwen/mine")).status_code == 401


async def test_regenerate_counts_against_the_callers_limits(
    start_hub: HubApp, personas_dir: Path, llm: FakeLLM
) -> None:
    """A persona's requests a minute count a regeneration as they count a message."""
    slow = {**GREETER, "name": "Sam the Scarce", "limits": {"requests_per_minute": 1}}
    (personas_dir / "sam.yaml").write_text(yaml.safe_dump(slow), encoding="utf-8")
    async with start_hub() as http:
        llm.script(Reply("a1"))
        card = (await http.get("/a2a/sam/.well-known/agent-card.json")).json()
        config = ClientConfig(
            httpx_client=http, supported_protocol_bindings=["JSONRPC"], streaming=False
        )
        await send(ClientFactory(config).create(parse_agent_card(card)), "q1", "s1")
        before = (await http.get(f"{BASE}/sam/s1")).json()
        refused = await http.post(f"{BASE}/sam/s1/regenerate", json={})
        assert refused.status_code == 429, refused.text
        assert int(refused.headers["Retry-After"]) >= 1
        assert (await http.get(f"{BASE}/sam/s1")).json() == before
        assert len(llm.requests) == 1


async def test_a_turn_the_a2a_handler_refuses_is_a_422_before_any_task(
    hub: httpx.AsyncClient, llm: FakeLLM
) -> None:
    """A context id REST takes (up to 200 characters) and A2A does not (128): regenerate and
    continue run on the A2A path, which refuses it, plainly and as events, asking no model."""
    long_id = "c" * 150
    started = await hub.post(BASE, json={"persona_id": "gwen", "context_id": long_id})
    assert started.status_code == 201, started.text
    for headers in ({}, {"Accept": "text/event-stream"}):
        response = await hub.post(f"{BASE}/gwen/{long_id}/continue", json={}, headers=headers)
        assert response.status_code == 422, response.text
        assert "contextId is longer than 128" in response.json()["detail"]
    # A turn is the caller's own: it names no other caller's conversation.
    named = await hub.post(f"{BASE}/gwen/{long_id}/regenerate?caller=key:bob", json={})
    assert named.status_code == 422, named.text
    assert "caller=" in named.json()["detail"]
    assert llm.requests == []
