"""Documents sent with a message, read into its turn, through the real hub (uvicorn, the
real a2a-sdk client, the scripted fake OpenAI server): every type's text reaches the model
exactly as docs/media.md says, within the budget the message's documents share (what was
cut is said, naming the file and its shown/total tokens); the stored user message keeps
the text and a ``files`` entry per document, which the model server never receives; a bad
document (encrypted, corrupt, a PDF bomb, too many pages, not UTF-8) fails its task naming
the part, and the hub serves on."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, Task, TaskState

from persona_agent.api.app import HubApp
from persona_agent.conversations.keys import history_key
from tests.conformance.conftest import Wire, file_part, text_part
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import TRANSPORTS, Hub, HubFactory
from tests.knowledge.pdfs import encrypted_pdf_of, pdf_bomb, pdf_of

PDF = pdf_of(["Ledger of the year.", "The treasury holds nine hundred drachmas."])
HTML = (
    b"<html><head><title>Hours</title><style>p {color: red}</style></head><body>"
    b"<h1>Opening hours</h1><p>We open at <b>nine</b>.</p><script>alert('no')</script>"
    b"</body></html>"
)
DOCUMENTS = [
    ("notes.txt", "text/plain", b"Buy olives.\nSell figs.\n"),
    ("plan.md", "text/markdown", b"# Plan\n\n- *walk* to the agora\n"),
    ("hours.html", "text/html", HTML),
    ("prices.csv", "text/csv", b"item,obols\nfish,3\nbread,1\n"),
    ("stall.json", "application/json", '{"stall": "north", "caf\u00e9": true}'.encode()),
    ("ledger.pdf", "application/pdf", PDF),
]

TEXTS = [
    "Buy olives.\nSell figs.",
    "# Plan\n\n- *walk* to the agora",
    "Opening hours\n\nWe open at nine.",
    "item,obols\nfish,3\nbread,1",
    '{"stall": "north", "caf\u00e9": true}',
    "Ledger of the year.\n\nThe treasury holds nine hundred drachmas.",
]
"""Each document's text as read (the HTML's: its text; the PDF's: its pages), stripped."""
FILES = [
    {
        "name": name,
        "mediaType": media,
        "bytes": len(data),
        "tokens": -(-len(text) // 4),
        "shownTokens": -(-len(text) // 4),
    }
    for (name, media, data), text in zip(DOCUMENTS, TEXTS, strict=True)
]
"""The stored message's ``files``: each document's tokens (characters / 4, rounded up, of
its text), all shown within the default budget."""


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def message_of(text: str, *documents: tuple[str, str, bytes], context_id: str = "") -> Message:
    parts = [Part(text=text)]
    parts += [Part(raw=data, media_type=media, filename=name) for name, media, data in documents]
    return Message(
        role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts, context_id=context_id
    )


async def ask(hub: Hub, message: Message) -> Task:
    """A blocking send through the real client (JSON-RPC, A2A 1.0): its task."""
    client = await hub.client("socrates")
    (response,) = [r async for r in client.send_message(SendMessageRequest(message=message))]
    return response.task


async def stored(hub: Hub, context_id: str) -> list[dict[str, Any]]:
    """The conversation's messages as stored (its rows, not the engine's cache)."""
    assert isinstance(hub.app, HubApp)
    history = hub.app.parts.engine.history
    key = history_key("socrates", "", context_id)
    history.drop(key)
    return await history.load(key)


def status_text(task: Task) -> str:
    return "".join(part.text for part in task.status.message.parts)


async def test_every_document_type_is_read_into_the_turn_and_stored_with_it(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory() as hub:
        llm.script(Reply("Noted."), Reply("Fish costs three obols."))
        task = await ask(hub, message_of("Read my papers.", *DOCUMENTS))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
        blocks = [
            f"[document: {name}]\n{text}\n[end of {name}]"
            for (name, _, _), text in zip(DOCUMENTS, TEXTS, strict=True)
        ]
        content = "\n\n".join(["Read my papers.", *blocks])
        assert (
            blocks[2]
            == "[document: hours.html]\nOpening hours\n\nWe open at nine.\n[end of hours.html]"
        )
        assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": content}

        rows = await stored(hub, task.context_id)
        asked = [row for row in rows if row["role"] == "user"]
        assert asked == [{"role": "user", "content": content, "files": FILES}]

        # The next turn shows the document from the history; no `files` key reaches the model.
        follow = await ask(hub, message_of("What does fish cost?", context_id=task.context_id))
        assert follow.status.state == TaskState.TASK_STATE_COMPLETED
        sent = llm.requests[-1]["messages"]
        assert {"role": "user", "content": content} in sent
        assert [m for m in sent if "files" in m] == []


async def test_the_budget_is_shared_and_what_is_cut_is_said(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    short = ("short.txt", "text/plain", b"Ten tokens of text, or nearly so, here.")
    long_text = " ".join(f"Line {n} of the long report." for n in range(100))
    report = ("report.md", "text/markdown", long_text.encode())
    async with hub_factory(document_tokens=40) as hub:
        llm.script(Reply("Read."))
        task = await ask(hub, message_of("What does line 97 say?", short, report))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
        content = llm.requests[-1]["messages"][-1]["content"]
        # The short one (10 tokens) whole; the report gets the other 30 (120 characters), cut
        # at a word's end.
        shown = long_text[:120].rsplit(" ", 1)[0]
        shown_tokens = -(-len(shown) // 4)
        assert content == (
            "What does line 97 say?\n\n"
            "[document: short.txt]\nTen tokens of text, or nearly so, here.\n[end of short.txt]\n\n"
            f"[document: report.md]\n{shown}\n"
            f"[report.md is cut here: {shown_tokens} of its {-(-len(long_text) // 4)} tokens "
            "shown. The whole document is kept with this conversation: passages of the rest that a "
            "message asks about are looked up]"
        )
        # The report is kept with the conversation, and searched with the user's own words:
        # the passage that answers is found at once.
        assert "Line 97 of the long report." in str(llm.requests[-1]["messages"][0]["content"])
        [asked] = [row for row in await stored(hub, task.context_id) if row["role"] == "user"]
        assert [(f["name"], f["tokens"], f["shownTokens"]) for f in asked["files"]] == [
            ("short.txt", 10, 10),
            ("report.md", -(-len(long_text) // 4), shown_tokens),
        ]
        llm.script(Reply("Line 97."))
        later = await ask(hub, message_of("What does line 97 say?", context_id=task.context_id))
        assert later.status.state == TaskState.TASK_STATE_COMPLETED
        # The report is kept with the conversation: the passage that answers is found.
        assert "Line 97 of the long report." in str(llm.requests[-1]["messages"][0]["content"])


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        pytest.param(
            ("secret.pdf", "application/pdf", encrypted_pdf_of(["Hidden."])),
            "Part 1 (secret.pdf): the PDF is encrypted: send it without a password",
            id="encrypted",
        ),
        pytest.param(
            ("broken.pdf", "application/pdf", PDF[:70]),
            "Part 1 (broken.pdf): not a readable PDF (PdfStreamError)",
            id="corrupt",
        ),
        pytest.param(
            ("bomb.pdf", "application/pdf", pdf_bomb(100 * 1024 * 1024)),
            "Part 1 (bomb.pdf): the PDF's content decodes to more than 2,097,152 bytes "
            "(PERSONA_AGENT_DOCUMENT_MAX_DECODED_BYTES)",
            id="bomb",
        ),
        pytest.param(
            ("thick.pdf", "application/pdf", pdf_of(["one", "two", "three"])),
            "Part 1 (thick.pdf): 3 pages, over the limit of 2 (PERSONA_AGENT_DOCUMENT_MAX_PAGES)",
            id="pages",
        ),
        pytest.param(
            ("latin.txt", "text/plain", "caf\xe9".encode("latin-1")),
            "Part 1 (latin.txt): not UTF-8 text (byte 3): save it as UTF-8",
            id="not-utf-8",
        ),
        pytest.param(
            ("blank.html", "text/html", b"<html><script>x()</script></html>"),
            "Part 1 (blank.html): the document has no text to read",
            id="no-text",
        ),
    ],
)
async def test_a_bad_document_fails_its_task_naming_the_part_and_the_hub_serves_on(
    hub_factory: HubFactory, llm: FakeLLM, document: tuple[str, str, bytes], reason: str
) -> None:
    limits = {"document_max_pages": 2, "document_max_decoded_bytes": 2 * 1024 * 1024}
    async with hub_factory(max_message_bytes=4 * 1024 * 1024, **limits) as hub:
        task = await ask(hub, message_of("Read this.", document))
        assert task.status.state == TaskState.TASK_STATE_FAILED
        assert status_text(task).startswith(reason + " (reference ")
        assert llm.requests == []  # the model was never asked
        llm.script(Reply("Still here."))
        served = await send(await hub.client("socrates"), "Are you there?")
        assert served.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_cut_document_is_searched_with_the_users_own_words(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """The rest of a cut document is looked up at once: the passage that answers the
    question, beyond what the budget showed, is in the prompt of the same turn (searched
    with the message's own words, not the documents' text: see read_message_now)."""
    olives = [f"Olive oil from the north grove sold at {n} obols the jar." for n in range(80)]
    lines = [*olives[:50], "The harbour master is called Kallias.", *olives[50:]]
    ledger = ("ledger.txt", "text/plain", "\n".join(lines).encode())
    async with hub_factory(document_tokens=40) as hub:
        llm.script(Reply("Kallias [1]."))
        task = await ask(hub, message_of("Who is the harbour master?", ledger))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, status_text(task)
        content = llm.requests[-1]["messages"][-1]["content"]
        assert "Kallias" not in content  # not among what the budget showed
        assert "The harbour master is called Kallias." in str(
            llm.requests[-1]["messages"][0]["content"]
        )


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
async def test_documents_are_read_on_every_binding_and_version(
    hub_factory: HubFactory, llm: FakeLLM, transport: tuple[str, str], streaming: bool
) -> None:
    """Sent as each binding writes a file part (raw HTTP: the SDK's v0.3 HTTP+JSON client
    cannot decode the file bytes of the task it gets back, whatever the type)."""
    documents = [DOCUMENTS[3], DOCUMENTS[5]]  # the CSV and the PDF
    async with hub_factory(mcp_config=None) as hub:
        llm.script(Reply("Three obols."))
        wire = Wire(hub.http, "socrates", transport)
        parts = [text_part("Prices?"), *(file_part(d, m, n) for n, m, d in documents)]
        if streaming:
            events = wire.events(await wire.send_streaming_message(parts))
            assert events, "no events"
        else:
            task = wire.task(await wire.send_message(parts))
            assert wire.state(task) == "TASK_STATE_COMPLETED", task
        blocks = [
            f"[document: {name}]\n{TEXTS[index]}\n[end of {name}]"
            for index, (name, _, _) in ((3, DOCUMENTS[3]), (5, DOCUMENTS[5]))
        ]
        assert llm.requests[-1]["messages"][-1] == {
            "role": "user",
            "content": "\n\n".join(["Prices?", *blocks]),
        }


async def test_an_uploaded_pdf_bomb_is_refused_by_the_same_limit(hub_factory: HubFactory) -> None:
    """The persona's documents (REST, the folder) are read within the same limits."""
    async with hub_factory(document_max_decoded_bytes=2 * 1024 * 1024) as hub:
        response = await hub.http.post(
            "/api/v1/personas/socrates/documents",
            headers={"X-Requested-With": "tests"},
            files={"file": ("bomb.pdf", pdf_bomb(8 * 1024 * 1024))},
        )
        assert response.status_code == 413, response.text
        assert response.json()["detail"] == (
            "bomb.pdf: the PDF's content decodes to more than 2,097,152 bytes "
            "(PERSONA_AGENT_DOCUMENT_MAX_DECODED_BYTES)"
        )
