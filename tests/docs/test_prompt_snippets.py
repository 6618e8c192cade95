"""docs/prompt.md's ``curl`` lines, run as a reader pastes them in a sandbox against a hub
without keys, the persona answering through the scripted fake LLM: the newest answer's
prompt, then the same by its message id."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import HubFactory

READ = claim("docs/prompt.md", "socrates/walk/prompt")


async def test_the_prompt_curls_read_the_newest_answers_record_and_the_same_by_id(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    newest, by_id = expect(READ, "curl -s http", "curl -s http")
    async with hub_factory(mcp_config=None) as hub:

        def run(command: str, **more: str) -> Any:
            out = sandbox.run(rewrite(command, {DOC_URL: hub.settings.base_url, **more})).ok()
            return json.loads(out.stdout)

        llm.script(Reply("Virtue is knowledge."))
        await send(await hub.client("socrates"), "What is virtue?", "walk")
        record = await asyncio.to_thread(run, newest)
        assert (record["persona"], record["mode"], record["messages"]) == ("socrates", "message", 2)
        names = [section["name"] for section in record["sections"]]
        assert names[0] == "system"
        assert names[-1] == "conversation"
        same = await asyncio.to_thread(run, by_id, **{"<id>": str(record["messageId"])})
        assert same == record
