"""docs/knowledge.md's blocks, checked against a hub on a real uvicorn (the scripted fake
LLM answering): the curl commands upload and list a document as a reader pastes them;
the prompt section shown is what the model reads for the question the page names, over
the bundled bench documents; the citations shown have the shape the answer carries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from google.protobuf.json_format import MessageToDict

from persona_agent.personas.turn_prompt import DOCUMENTS_HEADING
from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import REPO, claim, commands
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import Hub, HubFactory

DOC = "docs/knowledge.md"
CURL = claim(DOC, "/api/v1/personas/socrates/documents")
SECTION = claim(DOC, DOCUMENTS_HEADING)
CITATIONS = claim(DOC, '{"citations": [')
QUESTION = "What does a mooring cost per metre in summer?"
BENCH = REPO / "bench" / "knowledge"
assert QUESTION in (REPO / DOC).read_text("utf-8"), "the page no longer names the question"


@pytest.fixture
async def hub(hub_factory: HubFactory) -> AsyncIterator[Hub]:
    async with hub_factory(mcp_config=None) as running:
        yield running


async def test_the_curl_commands_upload_and_list_a_document(sandbox: Sandbox, hub: Hub) -> None:
    upload, listing = (rewrite(c, {DOC_URL: hub.settings.base_url}) for c in commands(CURL))
    uploaded = json.loads((await asyncio.to_thread(sandbox.run, upload)).ok().stdout)
    assert uploaded["name"] == "harbour-handbook.md"
    assert uploaded["source"] == "upload"
    listed = json.loads((await asyncio.to_thread(sandbox.run, listing)).ok().stdout)
    assert [d["id"] for d in listed["documents"]] == [uploaded["id"]]


async def _asked(hub: Hub, llm: FakeLLM, question: str) -> tuple[str, list[dict[str, object]]]:
    for path in sorted(BENCH.iterdir()):
        if path.suffix != ".json":
            response = await hub.http.post(
                "/api/v1/personas/socrates/documents",
                headers={"X-Requested-With": "tests"},
                files={"file": (path.name, path.read_bytes())},
            )
            assert response.status_code == 201, response.text
    llm.script(Reply("3.20 euros a metre [1]."))
    task = await send(await hub.client("socrates"), question)
    metadata = MessageToDict(task.status.message.metadata)
    return str(llm.requests[-1]["messages"][0]["content"]), metadata["citations"]


def _pieces(shown: str) -> list[str]:
    """What the doc shows of each passage: the text before each ``...``, line by line."""
    return [
        piece.strip()
        for line in shown.splitlines()
        for piece in line.split("...")[:1]
        if piece.strip()
    ]


async def test_the_section_shown_is_what_the_model_reads(hub: Hub, llm: FakeLLM) -> None:
    prompt, cited = await _asked(hub, llm, QUESTION)
    section = prompt.split("\n\n" + DOCUMENTS_HEADING + "\n", 1)[1]
    assert SECTION.text.startswith(DOCUMENTS_HEADING + "\n")
    position = 0
    for piece in _pieces(SECTION.text.split("\n", 1)[1]):
        found = section.find(piece, position)
        assert found != -1, f"{piece!r} is not (in that order) in the prompt:\n{section}"
        position = found + len(piece)
    assert cited[0]["document"] == "harbour-handbook.md"
    assert cited[0]["passage"] == 3


async def test_the_citations_shown_have_the_shape_of_the_answer_s(hub: Hub, llm: FakeLLM) -> None:
    _, cited = await _asked(hub, llm, "How old does a child have to be to go up the tower?")
    shown = json.loads(CITATIONS.text)["citations"]
    keys = {frozenset(item) for item in cited}
    assert {frozenset(item) for item in shown} <= keys  # with a page (PDF) and without
    assert len(keys) == 2
    for item in cited:
        assert isinstance(item["passage"], float | int)
        assert str(item["documentId"]).startswith(tuple("0123456789abcdef"))
