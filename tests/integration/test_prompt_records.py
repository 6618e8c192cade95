"""What reached the model (issue 50, docs/prompt.md), through the real hub (uvicorn, the
scripted fake OpenAI server): an answer's prompt by section, from a persona with a lorebook,
memory on and a knowledge document: the lore entry that fired and its key, the entry cut by
the book's budget, what memory recalled, the passage found, the messages cut by a small
window; served to the conversation's owner only (404 for another caller); bounded per
conversation; gone with the conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToDict

from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import send, stream
from tests.integration.conftest import HubFactory
from tests.integration.persona_yaml import persona, write
from tests.integration.test_memory import database
from tests.knowledge.pdfs import pdf_of
from tests.knowledge.test_hub_documents import pdf_message

MARKET_DOCUMENTS = (
    ("obols.md", "A stallholder pays three obols a day to the market wardens."),
    ("fish.md", "A fishmonger pays two obols a day, in the northern stoa."),
)
"""Two documents that answer the same question: a budget of one passage leaves one out."""


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def upload_market_documents(http: httpx.AsyncClient, persona_id: str) -> None:
    """Give ``persona_id`` the :data:`MARKET_DOCUMENTS` through the REST API."""
    for name, text in MARKET_DOCUMENTS:
        upload = await http.post(
            f"/api/v1/personas/{persona_id}/documents",
            headers={"X-Requested-With": "tests"},
            files={"file": (name, text.encode())},
        )
        assert upload.status_code == 201, upload.text


FACT = "My dog is called Biscuit."
HANDBOOK = (
    "# Agora handbook\n\nA stallholder pays three obols a day to the market wardens.\n\n"
    "Fish may be sold only in the northern stoa.\n"
)
KEEPER = persona(
    "Lena the Lorekeeper",
    description="Lena keeps the lore of {{user}}'s valley.",
    personality="Patient and precise.",
    interaction_samples=[{"user": "Who are you?", "assistant": "I am {{char}}."}],
    post_history_instructions="Answer in one sentence.",
    memory={"enabled": True},
    lore={
        "token_budget": 20,
        "entries": [
            {
                "comment": "Dragons",
                "keys": ["wyrm", "dragon"],
                "content": "Dragons sleep under the mountain.",
                "priority": 10,
            },
            {
                "comment": "The castle",
                "keys": ["castle"],
                "content": "The castle of the valley was built by giants long ago. " * 2,
                "priority": 1,
            },
            {"comment": "Unheard", "keys": ["griffin"], "content": "Griffins nest high."},
        ],
    },
)
ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef00"


@pytest.fixture(autouse=True)
def keeper(personas_dir: Path) -> None:
    write(personas_dir, "keeper", KEEPER)


def section(record: dict[str, Any], name: str) -> dict[str, Any]:
    found = [s for s in record["sections"] if s["name"] == name]
    assert found, f"no {name} section in {[s['name'] for s in record['sections']]}"
    return dict(found[0])


async def last_answer_id(http: httpx.AsyncClient, context_id: str) -> int:
    response = await http.get(f"/api/v1/conversations/keeper/{context_id}")
    assert response.status_code == 200, response.text
    answers = [m for m in response.json()["messages"] if m["role"] == "assistant"]
    return int(answers[-1]["id"])


async def test_an_answers_prompt_by_section_shows_the_lore_memory_passages_and_cuts(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(memory=True, history_max_messages=2) as hub:
        upload = await hub.http.post(
            "/api/v1/personas/keeper/documents",
            headers={"X-Requested-With": "tests"},
            files={"file": ("handbook.md", HANDBOOK.encode())},
        )
        assert upload.status_code == 201, upload.text
        client = await hub.client("keeper")
        llm.script(Reply("Noted."), Reply("Gladly."), Reply("Three obols, Biscuit, dragons."))
        first = await send(client, FACT)
        context = first.context_id
        await send(client, "Let us speak of the weather.", context)
        await send(
            client,
            "Does the dragon sleep near the castle? What does a stallholder pay? "
            "And what is my dog called?",
            context,
        )
        sent = llm.requests[-1]["messages"]

        response = await hub.http.get(f"/api/v1/conversations/keeper/{context}/prompt")
        assert response.status_code == 200, response.text
        record = response.json()
        assert record["persona"] == "keeper"
        assert record["messages"] == len(sent)
        assert record["promptTokens"] > 0  # what the fake model said it read

        lore = section(record, "lore")
        assert [(i["label"], i["keys"]) for i in lore["items"]] == [("Dragons", ["dragon"])]
        assert lore["items"][0]["text"] == "Dragons sleep under the mountain."
        assert [(c["label"], c["keys"]) for c in lore["cut"]] == [("The castle", ["castle"])]
        assert "budget" in lore["cut"][0]["reason"]
        assert "Griffins" not in json.dumps(record)

        memory = section(record, "memory")
        assert any(FACT in item["text"] for item in memory["items"])
        knowledge = section(record, "knowledge")
        assert "three obols" in knowledge["items"][0]["text"]
        assert knowledge["items"][0]["label"] == "[1]"

        card = section(record, "card")
        assert ("Description", "Lena keeps the lore of User's valley.") in [
            (i["label"], i["text"]) for i in card["items"]
        ]
        examples = section(record, "examples")
        assert (
            examples["items"][0]["text"]
            == "User: Who are you?\nLena the Lorekeeper: I am Lena the Lorekeeper."
        )
        assert section(record, "post_history")["items"][0]["text"] == "Answer in one sentence."

        conversation = section(record, "conversation")
        shown = [(i["role"], i["text"]) for i in conversation["items"]]
        assert shown == [(m["role"], m["content"]) for m in sent[1:-1]]  # as sent
        assert FACT not in json.dumps(shown)  # it left the window of two messages
        assert "window of the last 2 messages" in conversation["cut"][0]["reason"]
        for part in record["sections"]:  # each section's tokens: its items'
            assert part["tokens"] == sum(item["tokens"] for item in part["items"])
        assert record["tokens"] == sum(part["tokens"] for part in record["sections"])
        in_system = {"system", "card", "examples", "lore", "memory", "knowledge", "summary"}
        system_tokens = sum(p["tokens"] for p in record["sections"] if p["name"] in in_system)
        assert system_tokens == -(-len(sent[0]["content"]) // 4)  # the system message's

        # The same record by the answer's message id; an earlier answer has its own.
        answer = await last_answer_id(hub.http, context)
        by_id = await hub.http.get(
            f"/api/v1/conversations/keeper/{context}/messages/{answer}/prompt"
        )
        assert by_id.json() == {**record, "messageId": answer}
        earlier = await hub.http.get(
            f"/api/v1/conversations/keeper/{context}/messages/{answer - 2}/prompt"
        )
        assert earlier.status_code == 200, earlier.text
        assert "lore" not in [s["name"] for s in earlier.json()["sections"]]  # no key yet
        missing = await hub.http.get(
            f"/api/v1/conversations/keeper/{context}/messages/{answer - 1}/prompt"
        )
        assert missing.status_code == 404  # a user message has no prompt record

        deleted = await hub.http.delete(f"/api/v1/conversations/keeper/{context}")
        assert deleted.status_code == 204
        gone = await hub.http.get(f"/api/v1/conversations/keeper/{context}/prompt")
        assert gone.status_code == 404


async def test_a_prompt_is_shown_to_the_conversations_owner_only(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    keys = json.dumps([{"name": "alice", "key": ALICE_KEY}, {"name": "bob", "key": BOB_KEY}])
    async with (
        hub_factory(api_keys=keys) as hub,
        httpx.AsyncClient(
            base_url=str(hub.http.base_url), headers={"Authorization": f"Bearer {ALICE_KEY}"}
        ) as alice,
        httpx.AsyncClient(
            base_url=str(hub.http.base_url), headers={"Authorization": f"Bearer {BOB_KEY}"}
        ) as bob,
    ):
        llm.script(Reply("Dragons sleep."))
        task = await send(await hub.client("keeper", http=alice), "Tell me of the dragon.")
        path = f"/api/v1/conversations/keeper/{task.context_id}"
        answer = await last_answer_id(alice, task.context_id)
        mine = await alice.get(f"{path}/messages/{answer}/prompt")
        assert mine.status_code == 200, mine.text
        assert section(mine.json(), "lore")["items"][0]["keys"] == ["dragon"]
        for url in (f"{path}/messages/{answer}/prompt", f"{path}/prompt"):
            theirs = await bob.get(url)
            assert theirs.status_code == 404, theirs.text
            assert "Dragons" not in theirs.text
        assert (await hub.http.get(f"{path}/prompt")).status_code == 401  # no key


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_only_the_last_records_of_a_conversation_are_kept(
    hub_factory: HubFactory, llm: FakeLLM, kind: str
) -> None:
    async with hub_factory(prompt_records_kept=2, **await database(kind)) as hub:
        client = await hub.client("keeper")
        llm.script(Reply("a1"), Reply("a2"), Reply("a3"))
        context = (await send(client, "q1")).context_id
        await send(client, "q2", context)
        await send(client, "q3", context)
        response = await hub.http.get(f"/api/v1/conversations/keeper/{context}")
        answers = [m["id"] for m in response.json()["messages"] if m["role"] == "assistant"]
        statuses = [
            (
                await hub.http.get(
                    f"/api/v1/conversations/keeper/{context}/messages/{answer}/prompt"
                )
            ).status_code
            for answer in answers
        ]
        assert statuses == [404, 200, 200]
        # A continuation's record takes the place of its answer's.
        llm.script(Reply(" and more"))
        continued = await hub.http.post(f"/api/v1/conversations/keeper/{context}/continue", json={})
        assert continued.status_code == 200, continued.text
        record = (await hub.http.get(f"/api/v1/conversations/keeper/{context}/prompt")).json()
        assert (record["messageId"], record["mode"]) == (answers[-1], "continue")


async def test_each_panel_members_answer_has_its_own_prompt(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        llm.script_for("You are Albert Einstein.", Reply("Imagination."))
        llm.script_for("You are Marie Curie.", Reply("Patience."))
        llm.script_for("You are Charles Darwin.", Reply("Variation."))
        task = await send(await hub.client("science-panel"), "What drives science?")
        members = [
            MessageToDict(artifact.metadata)["persona-agent/panel"] for artifact in task.artifacts
        ]
        assert {m["member"] for m in members} == {
            "albert-einstein",
            "marie-curie",
            "charles-darwin",
        }
        for member in members:
            path = f"/api/v1/conversations/{member['member']}/{member['contextId']}/prompt"
            response = await hub.http.get(path)
            assert response.status_code == 200, response.text
            record = response.json()
            assert record["persona"] == member["member"]
            asked = section(record, "conversation")["items"][-1]
            assert asked["role"] == "user"
            assert "What drives science?" in asked["text"]


async def test_a_consulted_personas_answer_has_its_own_prompt(
    hub_factory: HubFactory, llm: FakeLLM, personas_dir: Path
) -> None:
    write(personas_dir, "asker", persona("Asker", consult=["keeper"]))
    async with hub_factory() as hub:
        llm.script(
            ToolCalls([("consult__keeper", {"question": "Where does the dragon sleep?"})]),
            Reply("Under the mountain."),
            Reply("Lena says: under the mountain."),
        )
        events = await stream(await hub.client("asker", streaming=True), "Ask Lena.")
        results = [
            dict(part.data.struct_value.items())
            for event in events
            if event.HasField("status_update")
            for part in event.status_update.status.message.parts
            if part.HasField("data") and part.data.struct_value["kind"] == "tool-result"
        ]
        (result,) = results
        consulted = await hub.http.get(f"/api/v1/conversations/keeper/{result['contextId']}/prompt")
        assert consulted.status_code == 200, consulted.text
        lore = section(consulted.json(), "lore")
        assert lore["items"][0]["keys"] == ["dragon"]
        asker = await hub.http.get(
            f"/api/v1/conversations/asker/{events[-1].status_update.context_id}/prompt"
        )
        assert asker.status_code == 200, asker.text
        assert asker.json()["modelCalls"] == 2  # the tool call, then the answer


async def test_a_document_sent_is_a_placeholder_and_its_cut_is_said(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    pdf = pdf_of(["Ledger of the year.", "The treasury holds nine hundred drachmas."])
    async with hub_factory(document_tokens=5) as hub:
        client = await hub.client("keeper")
        llm.script(Reply("Nine hundred."))
        responses = [r async for r in client.send_message(pdf_message("What is in it?", pdf))]
        context = responses[0].task.context_id
        sent = llm.requests[-1]["messages"][-2]["content"]  # before the post-history system
        assert "[ledger.pdf is cut here" in sent
        record = (await hub.http.get(f"/api/v1/conversations/keeper/{context}/prompt")).json()
        conversation = section(record, "conversation")
        asked = conversation["items"][-1]
        assert asked["text"] == "What is in it?\n\n[document: ledger.pdf, ~52 tokens]"
        assert asked["tokens"] == -(-len(sent) // 4)  # the document's text counted
        assert conversation["cut"] == [
            {
                "label": "Document ledger.pdf",
                "reason": "5 of its 16 tokens shown (the document budget)",
            }
        ]


async def test_what_memory_and_the_documents_budgets_left_out_is_said(
    hub_factory: HubFactory, llm: FakeLLM, personas_dir: Path
) -> None:
    """Memory keeps one item a turn and the documents one passage: the others they found
    are in the record's cuts, with their text, tokens and which budget left them out."""
    write(personas_dir, "scribe", persona("Scribe", memory={"enabled": True, "max_items": 1}))
    async with hub_factory(memory=True, history_max_messages=2, knowledge_max_passages=1) as hub:
        await upload_market_documents(hub.http, "scribe")
        client = await hub.client("scribe")
        llm.script(Reply("Noted."), Reply("Noted too."), Reply("Fine."), Reply("Biscuit."))
        context = (await send(client, "My dog is called Biscuit.")).context_id
        await send(client, "My cat is called Pepper.", context)
        await send(client, "Let us speak of the weather.", context)
        await send(client, "What do my dog and my cat pay in obols a day?", context)

        response = await hub.http.get(f"/api/v1/conversations/scribe/{context}/prompt")
        assert response.status_code == 200, response.text
        record = response.json()
        memory = section(record, "memory")
        assert len(memory["items"]) == 1
        remembered = [item["text"] for item in memory["items"] + memory["cut"]]
        assert any("Biscuit" in text for text in remembered)
        assert any("Pepper" in text for text in remembered)
        assert memory["cut"], "memory's other items are not said"
        for cut in memory["cut"]:
            assert cut["reason"] == "over memory's limit of 1 items a turn"
            assert cut["tokens"] == -(-len(cut["text"]) // 4)
            assert cut["text"] not in json.dumps(llm.requests[-1]["messages"])  # not sent
        knowledge = section(record, "knowledge")
        assert len(knowledge["items"]) == 1
        (left,) = knowledge["cut"]
        assert left["label"] in ("obols.md, passage 1", "fish.md, passage 1")
        assert left["reason"] == "over the knowledge limit of 1 passages a turn"
        assert left["text"] not in llm.requests[-1]["messages"][0]["content"]
        shown = knowledge["items"][0]["text"] + left["text"]
        assert "three obols" in shown
        assert "two obols" in shown
