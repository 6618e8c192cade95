"""A persona's knowledge documents through the real hub (uvicorn, the scripted fake
OpenAI server): uploaded over REST, the passage that answers reaches the model's prompt
in its own marked section and the answer's metadata cites it; a bad file gets a 4xx
naming it and changes nothing; a PDF sent as an A2A file part is read into its turn, and
one cut to the document budget is kept for its conversation only; a file put in the
persona's documents folder is taken in; a deleted persona's documents go with it."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, Task
from google.protobuf.json_format import MessageToDict

from persona_agent.personas.turn_prompt import DOCUMENTS_HEADING
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import HERMIT, Hub, HubFactory
from tests.knowledge.pdfs import pdf_of

API = "/api/v1/personas/socrates/documents"
UPLOAD = {"X-Requested-With": "tests"}
HANDBOOK = (
    "# Agora handbook\n\nThe market opens at dawn and closes when the bell of the temple "
    "rings at noon.\n\nFish may be sold only in the northern stoa, never in the southern "
    "one.\n\nA stallholder pays three obols a day to the market wardens.\n"
)


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def system_prompt(llm: FakeLLM) -> str:
    return str(llm.requests[-1]["messages"][0]["content"])


def citations(task: Task) -> list[dict[str, Any]]:
    metadata = MessageToDict(task.status.message.metadata) if task.status.message else {}
    return list(metadata.get("citations", []))


async def upload(hub: Hub, name: str, data: bytes, media: str = "") -> httpx.Response:
    file = (name, data, media) if media else (name, data)
    return await hub.http.post(API, headers=UPLOAD, files={"file": file})


async def listed(hub: Hub) -> list[dict[str, Any]]:
    response = await hub.http.get(API)
    assert response.status_code == 200, response.text
    return list(response.json()["documents"])


async def test_an_uploaded_document_is_retrieved_into_the_prompt_and_cited(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        response = await upload(hub, "handbook.md", HANDBOOK.encode())
        assert response.status_code == 201, response.text
        document = response.json()
        assert document["name"] == "handbook.md"
        assert document["mediaType"] == "text/markdown"
        assert response.headers["Location"].endswith(f"{API}/{document['id']}")
        assert [d["id"] for d in await listed(hub)] == [document["id"]]

        llm.script(Reply("Three obols [1]."))
        task = await send(await hub.client("socrates"), "How much does a stallholder pay?")
        prompt = system_prompt(llm)
        assert DOCUMENTS_HEADING in prompt
        assert "[1] (handbook.md, passage 1) # Agora handbook" in prompt
        assert "three obols a day" in prompt.split(DOCUMENTS_HEADING, 1)[1]
        assert "obols" not in json.dumps(llm.requests[-1]["messages"][1:])  # not the history
        assert citations(task) == [
            {"document": "handbook.md", "documentId": document["id"], "passage": 1.0}
        ]

        deleted = await hub.http.delete(f"{API}/{document['id']}")
        assert deleted.status_code == 204
        assert await listed(hub) == []
        llm.script(Reply("I do not know."))
        task = await send(await hub.client("socrates"), "How much does a stallholder pay?")
        assert DOCUMENTS_HEADING not in system_prompt(llm)
        assert citations(task) == []
        missing = await hub.http.delete(f"{API}/{document['id']}")
        assert missing.status_code == 404
        assert document["id"] in missing.json()["detail"]


@pytest.mark.parametrize(
    ("name", "data", "status", "reason"),
    [
        ("sheet.xlsx", b"PK\x03\x04 not a document", 415, "type is not read as a document"),
        ("broken.pdf", pdf_of(["Some text"])[:70], 422, "not a readable PDF"),
        ("latin.txt", "caf\xe9".encode("latin-1"), 422, "not UTF-8"),
        ("huge.txt", b"word " * 500, 413, "over the limit of 2,048 bytes"),
    ],
)
async def test_a_bad_file_gets_a_4xx_naming_it_and_nothing_changes(
    hub_factory: HubFactory, name: str, data: bytes, status: int, reason: str
) -> None:
    async with hub_factory(knowledge_max_bytes=2048) as hub:
        assert (await upload(hub, "handbook.md", HANDBOOK.encode())).status_code == 201
        before = await listed(hub)
        response = await upload(hub, name, data)
        assert response.status_code == status, response.text
        detail = response.json()["detail"]
        assert detail.startswith(f"{name}: ")
        assert reason in detail
        assert await listed(hub) == before


async def test_documents_are_written_by_writers_only(hub_factory: HubFactory) -> None:
    async with hub_factory() as hub:
        no_header = await hub.http.post(API, files={"file": ("a.txt", b"text")})
        assert no_header.status_code == 403  # what a web page's form could send
        assert "X-Requested-With" in no_header.json()["detail"]
        unknown = await hub.http.post(
            "/api/v1/personas/nobody/documents", headers=UPLOAD, files={"file": ("a.txt", b"t")}
        )
        assert unknown.status_code == 404
        assert await listed(hub) == []


def pdf_message(text: str, pdf: bytes, context_id: str | None = None) -> SendMessageRequest:
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=[
            Part(text=text),
            Part(raw=pdf, media_type="application/pdf", filename="ledger.pdf"),
        ],
    )
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(message=message)


async def test_a_pdf_file_part_is_read_into_its_turn_in_its_conversation_only(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    pdf = pdf_of(["Ledger of the year.", "The treasury holds nine hundred drachmas."])
    async with hub_factory() as hub:
        client = await hub.client("socrates")
        llm.script(Reply("Nine hundred."), Reply("Still nine hundred."), Reply("Unknown."))
        responses = [
            r
            async for r in client.send_message(pdf_message("How much does the treasury hold?", pdf))
        ]
        first = responses[0].task
        asked = llm.requests[-1]["messages"][-1]
        assert asked == {
            "role": "user",
            "content": "How much does the treasury hold?\n\n[document: ledger.pdf]\n"
            "Ledger of the year.\n\nThe treasury holds nine hundred drachmas.\n"
            "[end of ledger.pdf]",
        }
        assert DOCUMENTS_HEADING not in system_prompt(llm)  # whole in the turn: not kept
        assert citations(first) == []
        await send(client, "Remind me: how much is in the treasury?", first.context_id)
        assert "nine hundred drachmas" in json.dumps(llm.requests[-1]["messages"][1:])  # history

        await send(client, "How much does the treasury hold?")  # another conversation
        assert "drachmas" not in json.dumps(llm.requests[-1])
        assert await listed(hub) == []  # the conversation's, not the persona's


async def test_a_pdf_cut_to_the_budget_is_kept_and_its_rest_looked_up(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    pdf = pdf_of(["Ledger of the year.", "The treasury holds nine hundred drachmas."])
    async with hub_factory(document_tokens=5) as hub:
        client = await hub.client("socrates")
        llm.script(Reply("Nine hundred [1]."), Reply("Still nine hundred [1]."))
        responses = [
            r async for r in client.send_message(pdf_message("How much is in the treasury?", pdf))
        ]
        first = responses[0].task
        content = llm.requests[-1]["messages"][-1]["content"]
        assert content == (
            "How much is in the treasury?\n\n[document: ledger.pdf]\nLedger of the year.\n"
            "[ledger.pdf is cut here: 5 of its 16 tokens shown. The whole document is kept "
            "with this conversation: passages of the rest that a message asks about are "
            "looked up]"
        )
        assert "(ledger.pdf, page 2, passage 2)" in system_prompt(llm)  # the rest, found
        cited = {(c["document"], c["page"], c["passage"]) for c in citations(first)}
        assert ("ledger.pdf", 2, 2) in cited
        await send(client, "Remind me: how much is in the treasury?", first.context_id)
        assert "nine hundred drachmas" in system_prompt(llm)  # later turns look it up too


async def test_a_corrupt_pdf_part_fails_the_task_naming_it(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        client = await hub.client("socrates")
        responses = [
            r async for r in client.send_message(pdf_message("Read this.", b"%PDF-1.4 broken"))
        ]
        task = responses[0].task
        text = "".join(p.text for p in task.status.message.parts)
        assert "Part 1 (ledger.pdf): not a readable PDF" in text
        assert llm.requests == []  # the model never asked


async def wait_for_documents(hub: Hub, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(60):
        while len(found := await listed(hub)) != count:  # noqa: ASYNC110 (a REST view)
            await asyncio.sleep(0.1)
    return found


async def test_the_documents_folder_is_taken_in_and_followed(
    hub_factory: HubFactory, llm: FakeLLM, personas_dir: Path
) -> None:
    folder = personas_dir / "socrates.documents"
    folder.mkdir()
    (folder / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    (folder / "ignored.xlsx").write_bytes(b"PK")
    async with hub_factory() as hub:
        [document] = await wait_for_documents(hub, 1)  # taken in at start-up
        assert (document["name"], document["source"]) == ("handbook.md", "directory")

        (folder / "hours.html").write_text("<p>The baths open at the third hour.</p>")
        found = await wait_for_documents(hub, 2)  # followed while the hub runs
        assert sorted(d["name"] for d in found) == ["handbook.md", "hours.html"]
        llm.script(Reply("At the third hour [1]."))
        task = await send(await hub.client("socrates"), "When do the baths open?")
        assert "The baths open at the third hour." in system_prompt(llm)
        assert citations(task)[0]["document"] == "hours.html"

        (folder / "handbook.md").unlink()
        [left] = await wait_for_documents(hub, 1)
        assert left["name"] == "hours.html"


async def test_a_deleted_persona_takes_its_documents_with_it(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        assert (await upload(hub, "handbook.md", HANDBOOK.encode())).status_code == 201
        assert (await hub.http.delete("/api/v1/personas/socrates")).status_code == 204
        created = await hub.http.post("/api/v1/personas", json={"id": "socrates", **HERMIT})
        assert created.status_code == 201, created.text
        assert await listed(hub) == []  # a new persona of its id has none of them


async def test_a_folder_made_before_its_persona_is_taken_in_when_the_persona_comes(
    hub_factory: HubFactory, personas_dir: Path
) -> None:
    folder = personas_dir / "hypatia.documents"
    folder.mkdir()
    (folder / "notes.md").write_text("Hypatia taught mathematics in Alexandria.\n")
    async with hub_factory(watch_personas=False) as hub:
        created = await hub.http.post("/api/v1/personas", json={"id": "hypatia", **HERMIT})
        assert created.status_code == 201, created.text
        path = "/api/v1/personas/hypatia/documents"
        async with asyncio.timeout(60):
            while not (found := (await hub.http.get(path)).json()["documents"]):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        assert [(d["name"], d["source"]) for d in found] == [("notes.md", "directory")]
