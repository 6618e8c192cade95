"""Personas that remember (docs/memory.md), through the real hub over HTTP: what a caller
tells a persona in one conversation reaches the persona's prompt in the caller's next
conversation, marked as remembered; never another caller's prompt; an anonymous caller's
memory stays in its conversation. On SQLite, and on PostgreSQL when one answers.

The cross-caller test fails when the memory's scope leaves the caller out (make
``MemoryStore.load`` ignore the owner, and it does)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from pydantic import ValidationError

from persona_agent.api.app import create_app
from persona_agent.errors import ConfigError
from persona_agent.personas.turn_prompt import REMEMBERED_HEADING
from persona_agent.settings import Settings
from tests.conftest import migrated_postgres
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send
from tests.integration.conftest import BUNDLED, HERMIT, Hub, HubFactory

ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef00"
FACT = "My dog is called Biscuit."


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def system_prompt(request: dict[str, Any]) -> str:
    """The first system message of a recorded chat request."""
    return str(request["messages"][0]["content"])


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def database(kind: str) -> dict[str, Any]:
    return {"database_url": await migrated_postgres()} if kind == "postgresql" else {}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_caller_is_remembered_in_a_new_conversation_and_never_by_another(
    hub_factory: HubFactory, llm: FakeLLM, kind: str
) -> None:
    settings = {"memory": True, "api_keys": f"{ALICE_KEY},{BOB_KEY}", **await database(kind)}
    async with (
        hub_factory(**settings) as hub,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as alice_http,
        httpx.AsyncClient(headers=bearer(BOB_KEY), timeout=30) as bob_http,
    ):
        alice = await hub.client("socrates", http=alice_http)
        bob = await hub.client("socrates", http=bob_http)
        llm.script(Reply("A fine name."), Reply("Biscuit, you said."), Reply("I do not know."))
        first = await send(alice, FACT)
        assert REMEMBERED_HEADING not in system_prompt(llm.requests[-1])  # nothing yet

        second = await send(alice, "What is the name of my dog?")  # a new conversation
        assert second.context_id != first.context_id
        prompt = system_prompt(llm.requests[-1])
        assert REMEMBERED_HEADING in prompt
        assert f"The user said: {FACT}" in prompt
        assert "Biscuit" not in json.dumps(llm.requests[-1]["messages"][1:])  # not history

        await send(bob, "What is the name of my dog?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])


async def test_another_persona_does_not_remember_what_its_caller_told_one(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with (
        hub_factory(memory=True, api_keys=ALICE_KEY) as hub,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as http,
    ):
        llm.script(Reply("Noted."), Reply("Who?"))
        await send(await hub.client("socrates", http=http), FACT)
        await send(await hub.client("hermit", http=http), "What is my dog called?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])


async def test_an_anonymous_caller_is_remembered_within_its_conversation_only(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with hub_factory(memory=True, history_max_messages=2) as hub:
        client = await hub.client("socrates")
        llm.script(Reply("Noted."), Reply("Fine."), Reply("Biscuit."), Reply("Who?"))
        first = await send(client, FACT)
        await send(client, "Let us speak of virtue.", first.context_id)
        # The fact has left the window (two messages): memory brings it back.
        await send(client, "What is the name of my dog?", first.context_id)
        request = llm.requests[-1]
        assert FACT not in json.dumps(request["messages"][1:])
        assert f"The user said: {FACT}" in system_prompt(request)

        await send(client, "What is the name of my dog?")  # a new conversation
        assert "Biscuit" not in json.dumps(llm.requests[-1])


async def test_memory_is_off_by_default(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with (
        hub_factory(api_keys=ALICE_KEY) as hub,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as http,
    ):
        client = await hub.client("socrates", http=http)
        llm.script(Reply("Noted."), Reply("Who?"))
        await send(client, FACT)
        await send(client, "What is the name of my dog?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])


async def test_a_deleted_persona_forgets_and_a_new_one_of_its_id_remembers_nothing(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    api = "/api/v1/personas"
    async with (
        hub_factory(memory=True, api_keys=ALICE_KEY) as hub,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as http,
    ):
        body = {**HERMIT, "id": "newton"}
        assert (await http.post(f"{hub.settings.base_url}{api}", json=body)).status_code == 201
        llm.script(Reply("Noted."), Reply("Who?"))
        await send(await hub.client("newton", http=http), FACT)
        deleted = await http.delete(f"{hub.settings.base_url}{api}/newton")
        assert deleted.status_code == 204
        assert (await http.post(f"{hub.settings.base_url}{api}", json=body)).status_code == 201

        await send(await hub.client("newton", http=http), "What is the name of my dog?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])


async def test_a_caller_is_remembered_with_a_model_shipped_in_its_wheel(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    pytest.importorskip("wordllama")
    settings = {"memory": True, "memory_embeddings": "wordllama", "api_keys": ALICE_KEY}
    async with (
        hub_factory(**settings) as hub,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as http,
    ):
        client = await hub.client("socrates", http=http)
        llm.script(Reply("A fine name."), Reply("Biscuit."))
        await send(client, FACT)
        await send(client, "What is the name of my pet?")  # no word of the fact but "my"
        assert f"The user said: {FACT}" in system_prompt(llm.requests[-1])


def test_memory_settings_that_cannot_work_stop_start_up(tmp_path: Path) -> None:
    local: dict[str, Any] = {"data_dir": tmp_path, "personas_dir": BUNDLED, "memory": True}
    settings = Settings(_env_file=None, llm_backend="local", memory_embeddings="openai", **local)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="openai LLM backend"):
        create_app(settings)
    with pytest.raises(ValidationError, match="memory_embeddings"):
        Settings(_env_file=None, **{"memory_embeddings": "word2vec"})  # type: ignore[arg-type,call-arg]


async def test_an_embeddings_endpoint_that_fails_leaves_the_answer_whole(
    hub_factory: HubFactory, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    # The scripted server has no /embeddings: every embedding call fails (404).
    async with hub_factory(memory=True, memory_embeddings="openai") as hub:
        client = await hub.client("socrates")
        llm.script(Reply("A fine name."), Reply("Biscuit."))
        first = await send(client, FACT)
        second = await send(client, "What is the name of my dog?", first.context_id)
    assert second.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(second) == "Biscuit."
    assert FACT in json.dumps(llm.requests[-1]["messages"])  # the history is whole
    logged = [record.getMessage() for record in caplog.records]
    assert logged.count("persona socrates: a turn could not be remembered") == 2


async def card_served(hub: Hub, persona_id: str) -> None:
    """Wait until ``hub`` serves the persona another replica wrote (it is notified)."""
    async with asyncio.timeout(60):
        card = f"/a2a/{persona_id}/.well-known/agent-card.json"
        while (await hub.http.get(card)).is_error:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_two_hubs_on_one_database_see_each_other_s_memories_and_deletes(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path
) -> None:
    api = "/api/v1/personas"
    url = await migrated_postgres()
    settings = {"memory": True, "api_keys": ALICE_KEY, "database_url": url}
    async with (
        hub_factory(**settings) as one,
        hub_factory(**settings, data_dir=tmp_path / "other") as other,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as http,
    ):
        body = {**HERMIT, "id": "newton"}
        assert (await http.post(f"{one.settings.base_url}{api}", json=body)).status_code == 201
        await card_served(other, "newton")
        llm.script(*(Reply("Noted.") for _ in range(5)))
        await send(await one.client("newton", http=http), FACT)
        await send(await other.client("newton", http=http), "What is the name of my dog?")
        assert f"The user said: {FACT}" in system_prompt(llm.requests[-1])  # added by one

        await send(await other.client("newton", http=http), "I was born in Lisbon.")
        await send(await one.client("newton", http=http), "Where was I born, Lisbon?")
        assert "The user said: I was born in Lisbon." in system_prompt(llm.requests[-1])

        # Deleted through one (its persona, and so its memories): the other's index, which
        # held them, must not bring them back.
        assert (await http.delete(f"{one.settings.base_url}{api}/newton")).status_code == 204
        assert (await http.post(f"{one.settings.base_url}{api}", json=body)).status_code == 201
        await card_served(other, "newton")
        await send(await other.client("newton", http=http), "What is the name of my dog?")
        assert "Biscuit" not in json.dumps(llm.requests[-1])
