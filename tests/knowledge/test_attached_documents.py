"""Documents a caller attached to its conversations (A2A file parts), through the real hub:
listed and deleted one by one over REST by that caller only (another caller's are not
found), and on real databases (a SQLite file and PostgreSQL): a caller's list holds
nobody else's (a LIKE wildcard in the name, another case), and the persona's own routes
do not reach a conversation's document.

Drop the exact filter after the LIKE, or the owner check of the delete, and it fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from persona_agent.conversations.keys import conversation_key
from persona_agent.db import GroupCommitWriter
from persona_agent.errors import DocumentNotFoundError
from persona_agent.knowledge.turn import AttachedFile
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import HubFactory
from tests.integration.test_memory_api import ALICE_KEY, BOB_KEY, KEYS, caller
from tests.knowledge.pdfs import pdf_of
from tests.knowledge.test_hub_documents import pdf_message, system_prompt
from tests.knowledge.test_library import knowledge

ATTACHED = "/api/v1/personas/socrates/conversation-documents"
TARGET = "key:a_b"
LOOKALIKES = ["key:axb", "KEY:A_B", "key:a_b2"]


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def test_a_caller_lists_and_deletes_the_documents_it_attached(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path
) -> None:
    pdf = pdf_of(["Ledger of the year.", "The treasury holds nine hundred drachmas."])
    log = tmp_path / "audit.jsonl"
    async with (
        # A budget of 8 tokens cuts the ledger: the conversation keeps it, for the rest.
        hub_factory(api_keys=KEYS, audit_log=str(log), document_tokens=8) as hub,
        caller(hub, ALICE_KEY) as alice,
        caller(hub, BOB_KEY) as bob,
    ):
        client = await hub.client("socrates", http=alice)
        llm.script(Reply("Nine hundred [1]."), Reply("I do not know."))
        message = pdf_message("How much does the treasury hold?", pdf)
        responses = [r async for r in client.send_message(message)]
        first = responses[0].task
        listed = await alice.get(ATTACHED)
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert (body["persona"], body["caller"]) == ("socrates", "key:alice")
        [document] = body["documents"]
        assert (document["name"], document["source"]) == ("ledger.pdf", "a2a")
        assert document["contextId"] == first.context_id
        one = await alice.get(ATTACHED, params={"contextId": first.context_id})
        assert one.json()["documents"] == [document]
        other = await alice.get(ATTACHED, params={"contextId": "another"})
        assert other.json()["documents"] == []
        assert (await alice.get("/api/v1/personas/socrates/documents")).json()["documents"] == []

        # Bob sees none of it, and cannot delete it; nor can the persona's own route.
        assert (await bob.get(ATTACHED)).json()["documents"] == []
        refused = await bob.delete(f"{ATTACHED}/{document['id']}")
        assert refused.status_code == 404
        assert document["id"] in refused.json()["detail"]
        as_persona = await alice.delete(f"/api/v1/personas/socrates/documents/{document['id']}")
        assert as_persona.status_code == 404
        assert [d["id"] for d in (await alice.get(ATTACHED)).json()["documents"]] == [
            document["id"]
        ]

        deleted = await alice.delete(f"{ATTACHED}/{document['id']}")
        assert deleted.status_code == 204
        assert (await alice.get(ATTACHED)).json()["documents"] == []
        await send(client, "Remind me: how much is in the treasury?", first.context_id)
        assert "drachmas" not in system_prompt(llm)  # its later turns read it no more
        assert (await alice.delete(f"{ATTACHED}/{document['id']}")).status_code == 404
        unknown = await alice.get("/api/v1/personas/nobody/conversation-documents")
        assert unknown.status_code == 404

    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    deletes = [e for e in events if e["action"] == "memory.document.delete"]
    assert [(e["principal"], e["caller"], e["document"], e["outcome"]) for e in deletes] == [
        ("key:alice", "key:alice", document["id"], "ok")
    ]


async def test_a_keyless_hub_wants_the_caller_named(hub_factory: HubFactory) -> None:
    async with hub_factory() as hub:
        response = await hub.http.get(ATTACHED)
        assert response.status_code == 400
        assert "caller=" in response.json()["detail"]
        named = await hub.http.get(ATTACHED, params={"caller": "key:alice"})
        assert named.status_code == 200, named.text
        assert named.json()["documents"] == []


async def test_a_callers_list_holds_its_own_documents_only(writer: GroupCommitWriter) -> None:
    library = knowledge(writer)
    for owner in [TARGET, *LOOKALIKES]:
        for context in ("c1", "c2"):
            note = AttachedFile(f"{context}.html", "text/html", f"<p>{owner} note</p>".encode())
            await library.for_turn("socrates", conversation_key(owner, context), "note?", [note])
    own = await library.attached("socrates", conversation_key(TARGET, ""))
    assert [(d.name, d.conversation) for d in own] == [
        ("c1.html", conversation_key(TARGET, "c1")),
        ("c2.html", conversation_key(TARGET, "c2")),
    ]
    assert await library.attached("hermit", conversation_key(TARGET, "")) == []
    lookalike = (await library.attached("socrates", conversation_key(LOOKALIKES[0], "")))[0]
    with pytest.raises(DocumentNotFoundError):
        await library.delete_attached("socrates", conversation_key(TARGET, ""), lookalike.id)
    with pytest.raises(DocumentNotFoundError):  # the persona's own: not a conversation's
        await library.delete("socrates", own[0].id)
    gone = await library.delete_attached("socrates", conversation_key(TARGET, ""), own[0].id)
    assert gone.id == own[0].id
    left = await library.attached("socrates", conversation_key(TARGET, ""))
    assert [d.id for d in left] == [own[1].id]
