"""docs/conversations.md's ``curl`` lines, run as a reader pastes them in a sandbox against
a hub without keys, the persona answering through the scripted fake LLM. The substitutions:
the docs' hub is the test hub, ``<anchor>`` and ``<id>`` the ids the answers showed,
``<persona>`` a persona with alternate greetings."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from tests.docs.sandbox import DOC_URL, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import send
from tests.integration.conftest import HubFactory

STEER = claim("docs/conversations.md", "socrates/walk/swipes/<anchor>")
STREAMED = claim("docs/conversations.md", "Accept: text/event-stream")
GREETING = claim("docs/conversations.md", '"greeting": 1, "context_id": "tavern"')
NUDGE = "[Continue your last message without repeating its original content.]"


def texts(conversation: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in conversation["messages"]]


async def test_the_conversation_curls_regenerate_swipe_continue_edit_fork_and_delete(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    read, regenerate, swipe, go_on, edit, fork, trim, listing, delete = expect(
        STEER,
        "curl -s http",
        "curl -s -X POST",
        "curl -s -X PUT",
        "curl -s -X POST",
        "curl -s -X PATCH",
        "curl -s -X POST",
        "curl -s -X DELETE",
        'curl -s "http',
        "curl -s -X DELETE",
    )
    async with hub_factory(mcp_config=None) as hub:

        def run(command: str, **more: str) -> Any:
            out = sandbox.run(rewrite(command, {DOC_URL: hub.settings.base_url, **more})).ok()
            return json.loads(out.stdout) if out.stdout else None

        llm.script(Reply("Virtue is knowledge."))
        await send(await hub.client("socrates"), "What is virtue?", "walk")
        first = await asyncio.to_thread(run, read)
        assert texts(first) == [("user", "What is virtue?"), ("assistant", "Virtue is knowledge.")]
        llm.script(Reply("Can virtue be taught?"))
        again = await asyncio.to_thread(run, regenerate)
        assert again["answer"] == "Can virtue be taught?"
        assert [(m["role"], m["content"]) for m in llm.requests[-1]["messages"][1:]] == [
            ("user", "What is virtue?")
        ]
        swipes = again["conversation"]["messages"][-1]["swipes"]
        assert swipes["texts"] == ["Virtue is knowledge.", "Can virtue be taught?"]
        back = await asyncio.to_thread(run, swipe, **{"<anchor>": str(swipes["anchor"])})
        assert texts(back)[-1] == ("assistant", "Virtue is knowledge.")
        llm.script(Reply(" And knowledge can be taught."))
        more = await asyncio.to_thread(run, go_on)
        assert more["answer"] == " And knowledge can be taught."
        assert llm.requests[-1]["messages"][-1] == {"role": "system", "content": NUDGE}
        assert (
            texts(more["conversation"])[-1][1]
            == "Virtue is knowledge. And knowledge can be taught."
        )
        question = more["conversation"]["messages"][0]["id"]
        edited = await asyncio.to_thread(run, edit, **{"<id>": str(question)})
        assert texts(edited)[0] == ("user", "What is courage?")
        forked = await asyncio.to_thread(run, fork, **{"<id>": str(question)})
        assert (forked["context_id"], texts(forked)) == ("walk-2", [("user", "What is courage?")])
        answer = edited["messages"][1]["id"]
        trimmed = await asyncio.to_thread(run, trim, **{"<id>": str(answer)})
        assert texts(trimmed) == [("user", "What is courage?")]
        listed = await asyncio.to_thread(run, listing)  # anonymous: never listed
        assert listed["detail"].startswith("Conversations are listed for an identified caller")
        assert await asyncio.to_thread(run, delete) is None  # 204
        assert (await hub.http.get("/api/v1/conversations/socrates/walk-2")).status_code == 404


async def test_the_streamed_regenerate_curl_gives_the_task_the_text_and_the_answer(
    sandbox: Sandbox, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    (regenerate,) = expect(STREAMED, "curl -sN -X POST")
    async with hub_factory(mcp_config=None) as hub:
        llm.script(Reply("Virtue is knowledge."))
        await send(await hub.client("socrates"), "What is virtue?", "walk")
        llm.script(Reply("Can virtue be taught?"))
        command = rewrite(regenerate, {DOC_URL: hub.settings.base_url})
        out = (await asyncio.to_thread(sandbox.run, command)).ok().stdout
    names = [line.removeprefix("event: ") for line in out.splitlines() if line.startswith("event")]
    data = [json.loads(line[6:]) for line in out.splitlines() if line.startswith("data: ")]
    assert (names[0], names[-1], set(names[1:-1])) == ("task", "answer", {"text"})
    assert data[0]["context_id"] == "walk"
    assert "".join(d["text"] for d in data[1:-1]) == "Can virtue be taught?"
    assert (data[-1]["answer"], data[-1]["task_id"]) == (
        "Can virtue be taught?",
        data[0]["task_id"],
    )


async def test_a_conversation_opens_with_the_greeting_chosen(
    sandbox: Sandbox, hub_factory: HubFactory, personas_dir: Path
) -> None:
    (start,) = expect(GREETING, "curl -s -X POST")
    persona = {
        "name": "Tavern Keeper",
        "description": "Keeps the tavern.",
        "greeting": "Hello!",
        "alternate_greetings": ["Good morning!"],
    }
    (personas_dir / "keeper.yaml").write_text(yaml.safe_dump(persona), encoding="utf-8")
    async with hub_factory(mcp_config=None) as hub:
        command = rewrite(start, {DOC_URL: hub.settings.base_url, "<persona>": "keeper"})
        opened = json.loads((await asyncio.to_thread(sandbox.run, command)).ok().stdout)
    assert opened["greetings"] == ["Hello!", "Good morning!"]
    assert texts(opened) == [("assistant", "Good morning!")]
    assert opened["messages"][0]["swipes"] == {
        "anchor": 0,
        "selected": 1,
        "count": 2,
        "texts": ["Hello!", "Good morning!"],
    }
