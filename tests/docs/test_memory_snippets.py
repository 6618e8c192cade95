"""docs/memory.md's ``curl`` lines that manage memory, run as a reader pastes them in a
sandbox against a hub with memory on and an API key, answering through the scripted fake
LLM. The substitutions: the docs' hub is the test hub (``rewrite``), ``<key>`` the key,
``<id>`` the id of the memory the list showed, ``<new-id>`` the id the edit answered."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import HubFactory

MANAGE = claim("docs/memory.md", "api/v1/personas/socrates/memories/search?q=dog")
KEY = "alice-key-0123456789abcdef"
FACT = "My dog is called Biscuit."


async def test_the_memory_curls_list_search_edit_delete_export_and_forget(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    listing, search, edit, delete, export, forget = expect(
        MANAGE,
        "curl -s -H",
        "curl -s -H",
        "curl -s -X PATCH",
        "curl -s -X DELETE",
        "curl -s -H",
        "curl -s -X DELETE",
    )
    async with hub_factory(memory=True, api_keys=KEY, mcp_config=None) as hub:
        url = {DOC_URL: hub.settings.base_url, "<key>": KEY}

        def run(command: str, **more: str) -> str:
            ran = sandbox.run(rewrite(command, {**url, **more})).ok()
            return ran.stdout

        llm.script(Reply("A fine name."), Reply("Lyon, then."))
        headers = {"X-API-Key": KEY}
        async with httpx.AsyncClient(
            base_url=hub.settings.base_url, headers=headers, timeout=30
        ) as http:
            await send(await hub.client("socrates", http=http), FACT)
            await send(await hub.client("socrates", http=http), "I live in Lyon.")

        listed = json.loads(await asyncio.to_thread(run, listing))
        assert set(listed) == {"persona", "caller", "items", "next"}
        assert set(listed["items"][0]) == {
            "id",
            "persona",
            "role",
            "text",
            "contextId",
            "rememberedAt",
        }
        assert listed["caller"].startswith("key:")
        fact = next(item for item in listed["items"] if item["text"] == FACT)
        found = json.loads(await asyncio.to_thread(run, search))
        assert found["items"][0]["text"] == FACT
        edited = json.loads(await asyncio.to_thread(run, edit, **{"<id>": str(fact["id"])}))
        assert edited["text"] == "My dog is called Rex."
        assert edited["id"] != fact["id"]
        gone = await asyncio.to_thread(run, delete, **{"<new-id>": str(edited["id"])})
        assert gone == ""  # 204
        lines = (await asyncio.to_thread(run, export)).splitlines()
        assert [json.loads(line)["text"] for line in lines] == [
            "A fine name.",
            "I live in Lyon.",
            "Lyon, then.",
        ]
        forgotten = json.loads(await asyncio.to_thread(run, forget))
        assert forgotten == {
            "caller": listed["caller"],
            "memories": 3,
            "conversations": 2,
            "messages": 4,
            "tasks": 2,
        }
