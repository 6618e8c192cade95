"""The running summary (docs/memory.md, "Running summary"), through the real hub over HTTP
and the scripted OpenAI-compatible server: when messages leave a conversation's window,
the model is asked, after the turn, for a summary of them (and then for the old summary
with the next ones); the next turn's system prompt carries it. A summarizer that fails
leaves the turns whole, and the next turn tries again. Stored per conversation on SQLite
and PostgreSQL; another caller's conversation, even of the same context id, never sees
it; deleted with its persona.

The window is 4 messages (two turns): after the third turn, the first turn has left it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.api.app import create_app
from persona_agent.conversations.summary_table import summaries_table
from persona_agent.db import create_engine
from persona_agent.errors import ConfigError
from persona_agent.memory.summary import FOLLOWING, SO_FAR
from persona_agent.personas.turn_prompt import SUMMARY_HEADING
from persona_agent.settings import Settings
from tests.conformance.conftest import wait_until
from tests.conftest import migrated_postgres
from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send
from tests.integration.conftest import BUNDLED, HERMIT, Hub, HubFactory
from tests.integration.test_metrics import scrape, value

ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef00"
FACT = "My dog is called Biscuit."
LATER = ["Let us speak of virtue.", "What is courage?"]
SUMMARIZED = f"User: {FACT}"
"""How the fake's summary (every line it was given) says the first message."""
WINDOW = {"memory": True, "history_max_messages": 4}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def asked(request: dict[str, Any]) -> tuple[str, str]:
    """A summarization request's summary so far, and the messages that follow it."""
    text = str(request["messages"][-1]["content"])
    so_far, _, following = text.partition(f"\n\n{FOLLOWING}\n")
    return so_far.removeprefix(f"{SO_FAR}\n"), following


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def database(kind: str) -> dict[str, Any]:
    return {"database_url": await migrated_postgres()} if kind == "postgresql" else {}


@asynccontextmanager
async def reading(hub: Hub) -> AsyncIterator[AsyncEngine]:
    """An engine of its own on the hub's database, to read what it stored."""
    engine = create_engine(hub.settings.resolved_database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


async def stored(engine: AsyncEngine, conversation: str | None = None) -> dict[str, str]:
    """The stored summaries by conversation (of one, or all)."""
    query = select(summaries_table.c.conversation, summaries_table.c.text)
    if conversation is not None:
        query = query.where(summaries_table.c.conversation == conversation)
    async with engine.connect() as conn:
        return {row[0]: row[1] for row in (await conn.execute(query)).all()}


async def summary_with(engine: AsyncEngine, conversation: str, text: str) -> str:
    """The conversation's summary once it holds ``text`` (waited for: it is made after
    the turn)."""

    async def holds() -> bool:
        return text in (await stored(engine, conversation)).get(conversation, "")

    await wait_until(f"a summary of {conversation} with {text!r}", holds)
    return (await stored(engine, conversation))[conversation]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_what_leaves_the_window_is_summarized_and_the_next_prompt_carries_it(
    hub_factory: HubFactory, llm: FakeLLM, kind: str
) -> None:
    async with hub_factory(**WINDOW, **await database(kind)) as hub, reading(hub) as db:
        client = await hub.client("socrates")
        first = await send(client, FACT)
        key = f"socrates:{first.context_id}"
        for text in LATER:
            await send(client, text, first.context_id)
        # The first turn has left the window: one summary of it, and of nothing else.
        summary = await summary_with(db, key, SUMMARIZED)
        (request,) = llm.summary_requests
        so_far, following = asked(request)
        assert so_far == "(none yet)"
        assert following.splitlines() == [
            f"User: {FACT}",
            f"Socrates: Hello from the fake LLM. You said: {FACT}",
        ]
        assert not any(text in json.dumps(request) for text in LATER)  # still in the window

        await send(client, "What is my dog called?", first.context_id)
        prompt = system_prompt(llm.requests[-1])
        assert f"{SUMMARY_HEADING}\n{summary}" in prompt
        assert FACT not in json.dumps(llm.requests[-1]["messages"][1:])  # not in the window

        # The next turn evicts the second: the new summary is made of the old one and it.
        await summary_with(db, key, f"User: {LATER[0]}")
        so_far, following = asked(llm.summary_requests[-1])
        assert so_far == summary
        assert following.splitlines()[0] == f"User: {LATER[0]}"
        assert FACT not in following
        assert len(llm.summary_requests) == 2


async def test_a_summarizer_that_fails_leaves_the_turns_whole_and_the_next_turn_retries(
    hub_factory: HubFactory, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    llm.script_summary(Fail(500, "the summarizer is down"))
    async with hub_factory(**WINDOW) as hub, reading(hub) as db:
        client = await hub.client("socrates")
        first = await send(client, FACT)
        key = f"socrates:{first.context_id}"
        for text in LATER:
            await send(client, text, first.context_id)
        await wait_until("the failure logged", _logged(caplog, "could not be made"))
        assert await stored(db) == {}

        fourth = await send(client, "What is my dog called?", first.context_id)
        assert fourth.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(fourth) == "Hello from the fake LLM. You said: What is my dog called?"
        # Tried again from where the stored summary ends (nowhere): the first turn is in.
        await summary_with(db, key, SUMMARIZED)
        assert FACT in asked(llm.summary_requests[1])[1]


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> Any:
    async def condition() -> bool:
        return any(text in record.getMessage() for record in caplog.records)

    return condition


async def test_a_summary_is_of_one_callers_conversation_only(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    settings = {**WINDOW, "api_keys": f"{ALICE_KEY},{BOB_KEY}"}
    async with (
        hub_factory(**settings) as hub,
        reading(hub) as db,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as alice_http,
        httpx.AsyncClient(headers=bearer(BOB_KEY), timeout=30) as bob_http,
    ):
        alice = await hub.client("socrates", http=alice_http)
        bob = await hub.client("socrates", http=bob_http)
        first = await send(alice, FACT)
        for text in LATER:
            await send(alice, text, first.context_id)
        (key,) = await _conversations_with(db, SUMMARIZED)
        assert key.startswith("socrates:@")  # an identified caller's conversation

        # Bob, in a context of the same id: a conversation of his own, with no summary.
        await send(bob, "What is my dog called?", first.context_id)
        assert SUMMARY_HEADING not in system_prompt(llm.requests[-1])
        assert "Biscuit" not in json.dumps(llm.requests[-1])
        # Alice, in a new conversation: its summary is of that conversation (none yet).
        await send(alice, "What is my dog called?")
        assert SUMMARY_HEADING not in system_prompt(llm.requests[-1])
        # Alice, back in hers: the summary is there.
        await send(alice, "And my dog?", first.context_id)
        assert SUMMARY_HEADING in system_prompt(llm.requests[-1])


async def _conversations_with(db: AsyncEngine, text: str) -> list[str]:
    async def one() -> bool:
        return any(text in summary for summary in (await stored(db)).values())

    await wait_until(f"a summary with {text!r}", one)
    return [key for key, summary in (await stored(db)).items() if text in summary]


async def test_a_deleted_persona_takes_its_summaries_with_it(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    api = "/api/v1/personas"
    async with (
        hub_factory(**WINDOW, api_keys=ALICE_KEY) as hub,
        reading(hub) as db,
        httpx.AsyncClient(headers=bearer(ALICE_KEY), timeout=30) as http,
    ):
        body = {**HERMIT, "id": "newton"}
        assert (await http.post(f"{hub.settings.base_url}{api}", json=body)).status_code == 201
        client = await hub.client("newton", http=http)
        first = await send(client, FACT)
        for text in LATER:
            await send(client, text, first.context_id)
        await _conversations_with(db, SUMMARIZED)
        assert (await http.delete(f"{hub.settings.base_url}{api}/newton")).status_code == 204
        assert await stored(db) == {}


async def test_the_summary_model_is_the_one_named_and_none_is_made_when_off(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    named = {**WINDOW, "memory_summary_model": "summarizer-mini"}
    async with hub_factory(**named) as hub, reading(hub) as db:
        client = await hub.client("socrates")
        first = await send(client, FACT)
        for text in LATER:
            await send(client, text, first.context_id)
        await _conversations_with(db, SUMMARIZED)
        assert [request["model"] for request in llm.summary_requests] == ["summarizer-mini"]
        # Its tokens are in the persona's usage, under the model that made it.
        usage = (await hub.http.get("/api/v1/personas/socrates/usage")).json()
        by_model = {entry["model"]: entry for entry in usage["byModel"]}
        assert by_model["summarizer-mini"]["answers"] == 1
        assert by_model["summarizer-mini"]["promptTokens"] > 0

    llm.reset()
    for settings in ({"memory_summary_model": "off"}, {"memory": False}):
        async with hub_factory(**{**WINDOW, **settings}) as hub:
            client = await hub.client("socrates")
            first = await send(client, FACT)
            for text in [*LATER, "And now?"]:
                await send(client, text, first.context_id)
            assert SUMMARY_HEADING not in system_prompt(llm.requests[-1])
    assert llm.summary_requests == []


def test_a_summary_model_named_with_the_embedded_model_stops_start_up(tmp_path: Path) -> None:
    values: dict[str, Any] = {"data_dir": tmp_path, "personas_dir": BUNDLED, "memory": True}
    named = Settings(
        _env_file=None, llm_backend="local", memory_summary_model="gpt-4o-mini", **values
    )  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="MEMORY_SUMMARY_MODEL needs the openai"):
        create_app(named)
    create_app(Settings(_env_file=None, llm_backend="local", **values))  # type: ignore[call-arg]


async def test_a_summarys_model_call_is_counted_as_the_turns_are(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """docs/observability.md: ``persona_agent_llm_calls`` and ``persona_agent_llm_tokens``
    count every call to the chat model, a running summary's too (its span:
    tests/integration/test_tracing.py)."""
    model = "gpt-4o-mini"
    llm.script(*(Reply(f"Answer {n}.", usage=(10, 2)) for n in range(3)))
    llm.script_summary(Reply("The user has a dog called Biscuit.", usage=(40, 6)))
    async with hub_factory(**WINDOW, llm_model=model) as hub, reading(hub) as db:
        client = await hub.client("socrates")
        first = await send(client, FACT)
        for text in LATER:
            await send(client, text, first.context_id)
        await summary_with(db, f"socrates:{first.context_id}", "Biscuit")
        samples = await scrape(hub)
    calls = "persona_agent_llm_calls_total"
    assert value(samples, calls, model=model, outcome="ok") == 3 + 1
    assert value(samples, calls, model=model, outcome="error") == 0
    tokens = "persona_agent_llm_tokens_total"
    assert value(samples, tokens, model=model, kind="input") == 3 * 10 + 40
    assert value(samples, tokens, model=model, kind="output") == 3 * 2 + 6


async def test_a_failed_summary_call_is_counted_as_an_error(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    model = "gpt-4o-mini"
    llm.script_summary(Fail(500, "summarizer down"))
    async with hub_factory(**WINDOW, llm_model=model) as hub:
        client = await hub.client("socrates")
        first = await send(client, FACT)
        for text in LATER:
            await send(client, text, first.context_id)

        async def failed() -> bool:
            samples = await scrape(hub)
            return (
                value(samples, "persona_agent_llm_calls_total", model=model, outcome="error") == 1
            )

        await wait_until("the summary's failed call counted", failed)
        samples = await scrape(hub)
    assert value(samples, "persona_agent_llm_calls_total", model=model, outcome="ok") == 3
