"""docs/memory.md's ``curl`` lines that manage memory, run as a reader pastes them in a
sandbox against a hub with memory on and an API key, answering through the scripted fake
LLM. The substitutions: the docs' hub is the test hub (``rewrite``), ``<key>`` the key,
``<id>`` the id of the memory the list showed, ``<new-id>`` the id the edit answered; the
commands find the hub and the key in ``PERSONA_AGENT_URL`` and ``PERSONA_AGENT_API_KEY``,
as the docs say."""

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
COMMANDS = claim("docs/memory.md", "uv run persona-agent memory list socrates")
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
            "documents": 0,  # the forgetting of documents: tests/memory/test_forgetting_a_caller.py
            "userPersonas": 0,
        }


async def test_the_memory_commands_list_export_and_forget(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    listing, export, forget = expect(
        COMMANDS,
        "uv run persona-agent memory list",
        "uv run persona-agent memory export",
        "uv run persona-agent memory forget",
    )
    async with hub_factory(memory=True, api_keys=KEY, mcp_config=None) as hub:
        headers = {"X-API-Key": KEY}
        llm.script(Reply("A fine name."))
        async with httpx.AsyncClient(
            base_url=hub.settings.base_url, headers=headers, timeout=30
        ) as http:
            await send(await hub.client("socrates", http=http), FACT)
        env = {"PERSONA_AGENT_URL": hub.settings.base_url, "PERSONA_AGENT_API_KEY": KEY}

        def run(command: str) -> str:
            return sandbox.run(command, env=env).ok().stdout

        listed = (await asyncio.to_thread(run, listing)).splitlines()
        assert [line.split()[1] for line in listed] == ["assistant", "user"]
        await asyncio.to_thread(run, export)
        saved = (sandbox.root / "socrates-memories.jsonl").read_text(encoding="utf-8")
        assert [json.loads(line)["text"] for line in saved.splitlines()] == [FACT, "A fine name."]
        said = await asyncio.to_thread(run, forget)
        assert said.startswith("Forgot key:")
        assert "2 memories" in said
