"""Memory as personas use and share it (docs/memory.md), through the real hub over HTTP
with the scripted model server: the ``remember``, ``recall`` and ``forget`` tools, each
on the turn's persona and caller alone; the persona file's ``memory`` settings (off,
budget, tools, sharing between personas that name each other); what the answer's
memory-v1 part says; the memory metrics on ``/metrics``.

The forget test fails when a delete leaves the caller out (drop the owner from
``SharedMemory``'s delete, and Bob's forget takes Alice's fact too); the sharing test
fails when sharing takes one file's word alone (drop the ``persona.id in
peer.memory.shared_with`` check, and ``test_sharing_takes_both_files_word`` does)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import Task

from persona_agent.personas.turn_prompt import REMEMBERED_HEADING
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import send
from tests.integration.conftest import Hub, HubFactory
from tests.integration.persona_yaml import persona, write
from tests.integration.test_metrics import scrape, total, value

MEMORY_DOC = Path(__file__).resolve().parents[2] / "docs" / "memory.md"
ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef00"
FACT = "Alice's dog is called Biscuit."


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or []}


def memory_part(task: Task) -> dict[str, Any] | None:
    """The memory-v1 data of the task's final message, if it has one."""
    for part in task.status.message.parts:
        if part.HasField("data") and part.data.struct_value["kind"] == "memory-v1":
            found: dict[str, Any] = json.loads(
                json.dumps(dict(part.data.struct_value.items()), default=list)
            )
            return found
    return None


@pytest.fixture
def memory_personas(personas_dir: Path) -> Path:
    """keeper (memory tools on), alpha and beta (sharing, each naming the other), gamma
    (naming alpha, whom alpha does not name back), loner (no sharing), mute (memory off),
    tight (a budget of one item, no tools)."""
    write(personas_dir, "keeper", persona("Keeper"))
    write(personas_dir, "alpha", persona("Alpha", memory={"shared_with": ["beta"]}))
    write(personas_dir, "beta", persona("Beta", memory={"shared_with": ["alpha", "gamma"]}))
    write(personas_dir, "gamma", persona("Gamma", memory={"shared_with": ["alpha"]}))
    write(personas_dir, "loner", persona("Loner"))
    write(personas_dir, "mute", persona("Mute", memory={"enabled": False}))
    write(personas_dir, "tight", persona("Tight", memory={"max_items": 1, "tools": False}))
    write(personas_dir, "duo", persona("Duo", panel={"members": ["alpha", "beta"]}))
    return personas_dir


class Callers:
    """One hub with memory on and two identified callers, Alice and Bob."""

    def __init__(self, hub: Hub, alice: httpx.AsyncClient, bob: httpx.AsyncClient) -> None:
        self.hub, self._alice, self._bob = hub, alice, bob

    async def alice(self, persona_id: str) -> Client:
        return await self.hub.client(persona_id, http=self._alice)

    async def bob(self, persona_id: str) -> Client:
        return await self.hub.client(persona_id, http=self._bob)


@asynccontextmanager
async def callers(hub_factory: HubFactory, **settings: Any) -> AsyncIterator[Callers]:
    async with (
        hub_factory(memory=True, api_keys=f"{ALICE},{BOB}", **settings) as hub,
        httpx.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=30) as alice,
        httpx.AsyncClient(headers={"Authorization": f"Bearer {BOB}"}, timeout=30) as bob,
    ):
        yield Callers(hub, alice, bob)


async def test_remember_keeps_a_fact_for_the_callers_next_conversation_and_no_other_caller(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        llm.script(ToolCalls([("remember", {"fact": FACT})]), Reply("I will remember."))
        kept = await send(await hub.alice("keeper"), "Remember my dog's name: Biscuit.")
        first, second = llm.requests[-2:]
        assert offered(first) == {"remember", "recall", "forget"}
        assert tool_results(second) == [f"Remembered: {FACT}"]
        assert memory_part(kept) == {"kind": "memory-v1", "kept": [FACT]}

        llm.script(Reply("Biscuit."))
        answered = await send(await hub.alice("keeper"), "What is my dog called?")  # new context
        prompt = system_prompt(llm.requests[-1])
        assert f"Noted about the user: {FACT}" in prompt.split(REMEMBERED_HEADING)[1]
        recalled = (memory_part(answered) or {}).get("recalled", [])
        assert f"Noted about the user: {FACT}" in recalled

        # Bob asks the same persona, and searches its memory himself: nothing of Alice's.
        llm.script(ToolCalls([("recall", {"query": "my dog's name"})]), Reply("No idea."))
        bobs = await send(await hub.bob("keeper"), "What is my dog called?")
        assert tool_results(llm.requests[-1]) == ["Nothing remembered matches."]
        assert "Biscuit" not in json.dumps(llm.requests[-2:])
        assert memory_part(bobs) is None


async def test_recall_finds_the_callers_items_and_forget_deletes_them_for_that_caller_only(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        for caller in (hub.alice, hub.bob):
            llm.script(ToolCalls([("remember", {"fact": FACT})]), Reply("Noted."))
            await send(await caller("keeper"), "Keep this.")

        llm.script(ToolCalls([("recall", {"query": "Biscuit the dog"})]), Reply("Found."))
        await send(await hub.alice("keeper"), "What do you know of my dog?")
        found = tool_results(llm.requests[-1])[0]
        assert f"Noted about the user: {FACT}" in found
        item_id = found.split("]")[0].removeprefix("[")  # "[0123abcd] Noted about ..."

        # Bob forgets by Alice's item's id (the same text: the same id): his copy goes.
        llm.script(ToolCalls([("forget", {"ids": [item_id]})]), Reply("Gone."))
        gone = await send(await hub.bob("keeper"), "Forget my dog.")
        assert tool_results(llm.requests[-1])[0].startswith("Forgot 1:")
        assert (memory_part(gone) or {}).get("forgotten") == [FACT]

        llm.script(Reply("Who?"))
        await send(await hub.bob("keeper"), "What is my dog called?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])
        llm.script(Reply("Biscuit."))
        await send(await hub.alice("keeper"), "What is my dog called?")
        assert f"Noted about the user: {FACT}" in system_prompt(llm.requests[-1])

        # Alice forgets by words: every item holding them, her own turns' too (and the turn
        # that forgets is not remembered).
        llm.script(ToolCalls([("forget", {"about": "Biscuit"})]), Reply("Biscuit is gone."))
        await send(await hub.alice("keeper"), "Forget all about Biscuit.")
        assert tool_results(llm.requests[-1])[0].startswith("Forgot ")
        llm.script(Reply("Who?"))
        await send(await hub.alice("keeper"), "What is my dog called?")
        assert "Biscuit" not in system_prompt(llm.requests[-1])


async def test_an_anonymous_caller_forgets_within_its_conversation(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """An anonymous caller's memory is its conversation's: ``forget`` deletes from it (it
    failed with "memory is not available now (KeyError)" on the SQLite writer)."""
    async with hub_factory(memory=True) as hub:
        client = await hub.client("keeper")
        llm.script(ToolCalls([("remember", {"fact": FACT})]), Reply("Noted."))
        kept = await send(client, "Remember my dog's name: Biscuit.")
        llm.script(ToolCalls([("forget", {"about": "Biscuit"})]), Reply("Gone."))
        gone = await send(client, "Forget my dog.", context_id=kept.context_id)
        forgot = tool_results(llm.requests[-1])[-1]
        assert forgot.startswith("Forgot "), forgot
        assert FACT in (memory_part(gone) or {}).get("forgotten", [])
        llm.script(ToolCalls([("recall", {"query": "Biscuit the dog"})]), Reply("No idea."))
        await send(client, "What is my dog called?", context_id=kept.context_id)
        assert FACT not in tool_results(llm.requests[-1])[-1]


async def test_a_memory_tool_call_that_is_wrong_is_an_error_the_model_reads(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        llm.script(
            ToolCalls([("remember", {"fact": "  "}), ("forget", {"about": 3})]), Reply("Sorry.")
        )
        await send(await hub.alice("keeper"), "Remember nothing.")
        assert tool_results(llm.requests[-1]) == [
            "Error: 'fact' is required: the fact about the user to keep",
            "Error: forget takes 'about' (text) and 'ids' (a list of ids)",
        ]


async def test_a_persona_shares_what_a_caller_told_it_with_a_persona_naming_it_back(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        llm.script(Reply("Noted."))
        await send(await hub.alice("alpha"), FACT)

        llm.script(Reply("Biscuit."))
        await send(await hub.alice("beta"), "What is my dog called?")
        assert f"The user told Alpha: {FACT}" in system_prompt(llm.requests[-1])

        for caller, persona_id in ((hub.bob, "beta"), (hub.alice, "loner")):
            llm.script(Reply("Who?"))
            await send(await caller(persona_id), "What is my dog called?")
            assert "Biscuit" not in json.dumps(llm.requests[-1]), persona_id


async def test_a_panels_members_share_what_a_caller_told_one_of_them(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        llm.script(Reply("Noted."))
        await send(await hub.alice("alpha"), FACT)
        for caller in (hub.alice, hub.bob):
            llm.script_for("You are Alpha.", Reply("Biscuit, I think."))
            llm.script_for("You are Beta.", Reply("Alpha would know."))
            await send(await caller("duo"), "What is my dog called?")
        alice_beta, bob_beta = [
            r for r in llm.requests if system_prompt(r).startswith("You are Beta.")
        ]
        assert f"The user told Alpha: {FACT}" in system_prompt(alice_beta)
        assert "Biscuit" not in json.dumps(bob_beta)


async def test_sharing_takes_both_files_word(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        llm.script(Reply("Noted."))
        await send(await hub.alice("alpha"), FACT)
        llm.script(Reply("Who?"))  # gamma names alpha, alpha does not name gamma
        await send(await hub.alice("gamma"), "What is my dog called?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])


async def test_a_persona_with_memory_off_or_a_small_budget_as_its_file_says(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        llm.script(Reply("Noted."), Reply("Who?"))
        await send(await hub.alice("mute"), FACT)
        await send(await hub.alice("mute"), "What is my dog called?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])
        assert offered(llm.requests[-1]) == set()

        llm.script(Reply("Noted."), Reply("Noted too."), Reply("Biscuit."))
        await send(await hub.alice("tight"), FACT)
        await send(await hub.alice("tight"), "My cat is called Biscuit too.")
        await send(await hub.alice("tight"), "Which pets are called Biscuit?")
        prompt = system_prompt(llm.requests[-1])
        assert prompt.split(REMEMBERED_HEADING)[1].count("\n- ") == 1  # max_items: 1
        assert offered(llm.requests[-1]) == set()  # tools: false


async def test_memory_searches_and_tool_calls_are_on_metrics(
    memory_personas: Path, hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with callers(hub_factory) as hub:
        llm.script(
            Reply("Noted."),
            ToolCalls([("recall", {"query": "dog"}), ("remember", {"fact": FACT})]),
            Reply("Biscuit."),
        )
        await send(await hub.alice("keeper"), "My dog is called Biscuit.")  # nothing yet
        await send(await hub.alice("keeper"), "What is my dog called?")
        samples = await scrape(hub.hub, Authorization=f"Bearer {ALICE}")
    searches = "persona_agent_memory_searches_total"
    assert value(samples, searches, persona="keeper", outcome="miss") == 1
    assert value(samples, searches, persona="keeper", outcome="hit") == 1
    items = value(samples, "persona_agent_memory_recalled_items_total", persona="keeper")
    assert items >= 1
    tokens = value(samples, "persona_agent_memory_recalled_tokens_total", persona="keeper")
    assert tokens >= len("The user said: My dog is called Biscuit.") / 4
    seconds = "persona_agent_memory_search_seconds_count"
    assert value(samples, seconds, persona="keeper") == 2
    tools = "persona_agent_memory_tool_calls_total"
    assert value(samples, tools, persona="keeper", tool="recall", outcome="ok") == 1
    assert value(samples, tools, persona="keeper", tool="remember", outcome="ok") == 1
    assert total(samples, tools, outcome="error") == 0


def test_the_docs_memory_v1_example_has_the_fields_the_hub_writes() -> None:
    """docs/memory.md's memory-v1 block: the kind, and the three lists the hub writes."""
    text = MEMORY_DOC.read_text(encoding="utf-8")
    block = text.split('```json\n{\n  "kind": "memory-v1"', 1)[1].split("```", 1)[0]
    example = json.loads('{"kind": "memory-v1"' + block)
    assert set(example) == {"kind", "recalled", "kept", "forgotten"}
    assert all(isinstance(example[name], list) for name in ("recalled", "kept", "forgotten"))
