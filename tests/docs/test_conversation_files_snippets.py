"""The "Moving chats" example (docs/conversations.md): the SillyTavern file the docs
show, saved as ``chat.jsonl`` in a sandbox, imported, read back as Markdown and exported
as SillyTavern JSONL with its ``curl`` lines as a reader pastes them, against a hub on this
machine without API keys (the docs' hub is the test hub: ``rewrite``); then the persona
continues the chat over A2A with the context id the docs chose."""

from __future__ import annotations

import asyncio
import json

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send
from tests.integration.conftest import HubFactory

DOCS = "docs/conversations.md"
FILE = claim(DOCS, '"character_name": "Socrates"')
COMMANDS = claim(DOCS, "conversations/import?persona_id=socrates&context_id=agora-1")


async def test_a_sillytavern_chat_moves_in_and_out_and_continues(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    upload, markdown, download = expect(COMMANDS, "curl -s -X POST", "curl -s ", "curl -s -o")
    (sandbox.root / "chat.jsonl").write_text(FILE.text, encoding="utf-8")
    async with hub_factory(mcp_config=None) as hub:
        url = {DOC_URL: hub.settings.base_url}

        def run(command: str) -> str:
            return sandbox.run(rewrite(command, url)).ok().stdout

        imported = json.loads(await asyncio.to_thread(run, upload))
        assert imported["context_id"] == "agora-1"
        assert [m["content"] for m in imported["messages"]] == [
            "Greetings, friend. What shall we examine today?",
            "What is courage?",
            "Tell me first: is courage a kind of knowledge?",
        ]
        assert imported["messages"][0]["swipes"]["count"] == 2
        assert imported["messages"][2]["swipes"]["selected"] == 1
        assert imported["messages"][0]["at"].startswith("2026-11-20T21:04")

        text = await asyncio.to_thread(run, markdown)
        assert text.startswith("# Socrates and User\n")
        assert "**Socrates** (2026-11-20 21:04 UTC) (alternative 1 of 2)" in text

        assert await asyncio.to_thread(run, download) == ""
        lines = (sandbox.root / "agora.jsonl").read_text(encoding="utf-8").splitlines()
        original = FILE.text.strip().splitlines()
        for line, before in zip(lines[1:], original[1:], strict=True):
            assert json.loads(line)["mes"] == json.loads(before)["mes"]
            assert json.loads(line).get("swipes") == json.loads(before).get("swipes")

        llm.script(Reply("Then tell me what the brave man knows."))
        task = await send(await hub.client("socrates"), "Perhaps it is.", "agora-1")
        assert answer_text(task) == "Then tell me what the brave man knows."
        prompt = [m["content"] for m in llm.requests[-1]["messages"]]
        assert prompt[-4:] == [
            "Greetings, friend. What shall we examine today?",
            "What is courage?",
            "Tell me first: is courage a kind of knowledge?",
            "Perhaps it is.",
        ]
