"""docs/conversations-user.md's and docs/a2a.md's examples of who the user is: the prompt
section as the doc shows it, the A2A ``curl`` and the REST ``curl`` lines run as a reader
pastes them in a sandbox against a hub answering through the scripted fake LLM (the docs'
hub is the test hub, ``<key>`` the key), and the metadata docs/a2a.md shows sent by the
real a2a-sdk client."""

from __future__ import annotations

import asyncio
import json

import httpx

from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.user_identity import UserPersona
from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import user_message
from tests.integration.conftest import HubFactory
from tests.personas import persona_data

SECTION = claim("docs/conversations-user.md", "# Who you are talking to")
A2A_CURL = claim("docs/conversations-user.md", '"method": "SendMessage"')
REST_CURLS = claim("docs/conversations-user.md", "api/v1/user-persona")
METADATA = claim("docs/a2a.md", '{"metadata": {"urn:persona-agent:extension:user:v1":')
KEY = "alice-key-0123456789abcdef"


def test_the_section_is_the_prompts() -> None:
    lines = SECTION.text.strip().splitlines()
    description = lines[-1].removeprefix("Ann's persona: ")
    persona = Persona.from_data("tess", persona_data())
    assert "\n".join(lines) in render_system_prompt(persona, user=UserPersona("Ann", description))


async def test_the_a2a_curl_names_the_user(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    (command,) = expect(A2A_CURL, "curl -s")
    async with hub_factory(mcp_config=None) as hub:
        llm.script(Reply("Good morning, Ann."), Reply("Still Ann."))
        pasted = rewrite(command, {DOC_URL: hub.settings.base_url})
        ran = (await asyncio.to_thread(sandbox.run, pasted)).ok()
        task = json.loads(ran.stdout)["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", ran.stdout
        system = llm.requests[-1]["messages"][0]["content"]
        assert "You are talking to Ann.\nAnn's persona: A botanist from Oslo." in system

        # docs/a2a.md's metadata, sent by the SDK client: the same conversation, renamed.
        metadata = json.loads(METADATA.text)["metadata"]
        metadata["urn:persona-agent:extension:user:v1"]["name"] = "Ann B."
        request = user_message("And now?", "walk-1")
        request.message.metadata.update(metadata)
        client = await hub.client("socrates")
        _ = [response async for response in client.send_message(request)]
        assert "You are talking to Ann B." in llm.requests[-1]["messages"][0]["content"]


async def test_the_rest_curls_save_read_and_delete(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    save, read, of_conversation, drop_conversation, drop = expect(
        REST_CURLS,
        "curl -s -X PUT",
        "curl -s -H",
        "curl -s -X PUT",
        "curl -s -X DELETE",
        "curl -s -X DELETE",
    )
    async with hub_factory(api_keys=KEY, mcp_config=None) as hub:
        url = {DOC_URL: hub.settings.base_url, "<key>": KEY}

        def run(command: str) -> str:
            return sandbox.run(rewrite(command, url)).ok().stdout

        async def talk() -> str:
            headers = {"X-API-Key": KEY}
            async with httpx.AsyncClient(
                base_url=hub.settings.base_url, headers=headers, timeout=30
            ) as http:
                client = await hub.client("socrates", http=http)
                request = user_message("Hello.", "walk-1")
                _ = [response async for response in client.send_message(request)]
            return str(llm.requests[-1]["messages"][0]["content"])

        saved = {"name": "Ann", "description": "A botanist from Oslo."}
        assert json.loads(await asyncio.to_thread(run, save)) == saved
        assert json.loads(await asyncio.to_thread(run, read)) == saved
        llm.script(Reply("One."), Reply("Two."), Reply("Three."), Reply("Four."))
        assert "Ann's persona: A botanist from Oslo." in await talk()
        await asyncio.to_thread(run, of_conversation)
        assert "You are talking to Dr. Ann Berg." in await talk()
        assert await asyncio.to_thread(run, drop_conversation) == ""  # 204
        assert "You are talking to Ann." in await talk()
        assert await asyncio.to_thread(run, drop) == ""
        assert "You are talking to" not in await talk()


REGENERATE = claim("docs/a2a.md", '"referenceTaskIds": ["<the latest task\'s id>"]')


async def test_the_regenerate_message_answers_again(hub_factory: HubFactory, llm: FakeLLM) -> None:
    """docs/a2a.md's regenerate message, sent on HTTP+JSON after two answers in its
    context: the model reads the conversation up to the last user message."""
    async with hub_factory(mcp_config=None) as hub:
        llm.script(Reply("Hello."), Reply("First."), Reply("Second."))
        client = await hub.client("socrates")
        last = ""
        for text in ("Hi.", "And?"):
            request = user_message(text, "walk-1")
            last = [response async for response in client.send_message(request)][-1].task.id
        body = REGENERATE.text.replace("<the latest task's id>", last)
        reply = await hub.http.post(
            "/a2a/socrates/message:send",
            content=body,
            headers={"A2A-Version": "1.0", "Content-Type": "application/json"},
        )
        assert reply.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply.text
        asked = [m["content"] for m in llm.requests[-1]["messages"][1:]]
        assert asked[-3:] == ["Hi.", "Hello.", "And?"]
