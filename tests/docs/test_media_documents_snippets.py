"""docs/media.md's "Documents" examples, against a hub on a real uvicorn (the scripted
fake LLM answering): the curl line is run as a reader pastes it, and the model reads the
user message the page shows; the stored message is the JSON the page shows; the cut
report reads as the page shows under the budget it names."""

from __future__ import annotations

import asyncio
import json
import uuid

from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

from persona_agent.api.app import HubApp
from persona_agent.conversations.keys import history_key
from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import HubFactory

DOC = "docs/media.md"
CURL = claim(DOC, '"mediaType": "text/csv", "filename": "prices.csv"')
READ = claim(DOC, "What does fish cost?\n\n[document: prices.csv]")
CUT = claim(DOC, "[report.md is cut here:")
STORED = claim(DOC, '"files": [{"name": "prices.csv"')
REPORT = " ".join(f"Line {n} of the long report." for n in range(100))


async def test_the_curl_line_sends_a_csv_the_model_reads_and_the_turn_stores(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    (curl,) = expect(CURL, "curl -s http")
    async with hub_factory(mcp_config=None) as hub:
        llm.script(Reply("Fish costs three obols."))
        command = rewrite(curl, {DOC_URL: hub.settings.base_url})
        ran = (await asyncio.to_thread(sandbox.run, command)).ok()
        task = json.loads(ran.stdout)["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": READ.text.strip()}
        assert isinstance(hub.app, HubApp)
        history = hub.app.parts.engine.history
        key = history_key("socrates", "", "market")
        history.drop(key)  # the row, not the cache
        [asked] = [m for m in await history.load(key) if m["role"] == "user"]
        assert asked == json.loads(STORED.text)


async def test_a_report_over_the_budget_reads_as_the_page_shows(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(mcp_config=None, document_tokens=30) as hub:
        llm.script(Reply("Read."))
        part = Part(raw=REPORT.encode(), media_type="text/markdown", filename="report.md")
        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[part])
        client = await hub.client("socrates")
        [response] = [r async for r in client.send_message(SendMessageRequest(message=message))]
        assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert llm.requests[-1]["messages"][-1]["content"] == CUT.text.strip()
