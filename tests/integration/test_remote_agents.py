"""Outside agents as tools (``agent__{name}``), through the whole hub: the scripted LLM
decides the calls; the agents are a second hub on another port, consulted with an API key
or an OAuth 2 token, and a real A2A agent of the tests' own (tests/servers/a2a_agent.py)
that fails, hangs or asks a question."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from a2a.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from persona_agent.api.app import create_app
from persona_agent.chat.tools import ToolResult, ToolUpdate, Turn
from persona_agent.collab.agent_tools import RemoteAgents
from persona_agent.collab.agents_file import parse_agents_config
from persona_agent.errors import ConfigError, ToolError
from persona_agent.observe.metrics import HubMetrics
from persona_agent.personas.model import Persona
from persona_agent.settings import Settings
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import (
    answer_text,
    send,
    status_text,
    stream,
    submit,
    wait_for_state,
)
from tests.integration.conftest import BUNDLED, TRANSPORTS, Hub, HubFactory
from tests.integration.test_metrics import scrape, value
from tests.servers.a2a_agent import ScriptedAgent
from tests.servers.oidc_issuer import AUDIENCE, OidcIssuer

HUB_B_KEY = "hub-a-key-0123456789abcdef"
CALLER = {
    "name": "Cal the Caller",
    "description": "A test persona who calls agents outside the hub.",
    "personal_background": "Cal exists to test outside agents.",
    "language_style": {"tone": "plain"},
    "knowledge_domains": {"Errands": ["calling"]},
}

CALLS = "persona_agent_remote_agent_calls_total"
BREAKER = "persona_agent_remote_agent_breaker_state"
RETRIES = "persona_agent_remote_agent_retries_total"


@pytest.fixture
def agent() -> Iterator[ScriptedAgent]:
    with ScriptedAgent() as running:
        yield running


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


def write_agents(tmp_path: Path, agents: dict[str, dict[str, Any]], caller: list[str]) -> Path:
    """The agents file, and the persona ``caller`` (in the hub's persona directory) who
    may call ``caller``."""
    path = tmp_path / "agents.yaml"
    path.write_text(yaml.safe_dump({"agents": agents}), encoding="utf-8")
    personas = tmp_path / "personas"
    (personas / "caller.yaml").write_text(
        yaml.safe_dump({**CALLER, "agents": caller}), encoding="utf-8"
    )
    return path


@asynccontextmanager
async def caller_hub(
    hub_factory: HubFactory, tmp_path: Path, agents: dict[str, dict[str, Any]], **settings: Any
) -> AsyncIterator[Hub]:
    path = write_agents(tmp_path, agents, list(agents))
    async with hub_factory(agents_file=path, mcp_config=None, **settings) as hub:
        yield hub


@asynccontextmanager
async def other_hub(hub_factory: HubFactory, tmp_path: Path, **settings: Any) -> AsyncIterator[Hub]:
    """A second hub, on another port, with personas and data of its own."""
    personas = tmp_path / "b-personas"
    if not personas.exists():
        shutil.copytree(BUNDLED, personas)
    async with hub_factory(
        personas_dir=personas, data_dir=tmp_path / "b-data", mcp_config=None, **settings
    ) as hub:
        yield hub


def card_url(hub: Hub, persona_id: str) -> str:
    return f"{hub.settings.base_url}/a2a/{persona_id}/.well-known/agent-card.json"


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def offered(request: dict[str, Any]) -> dict[str, str]:
    return {t["function"]["name"]: t["function"]["description"] for t in request["tools"]}


def progress_texts(events: list[Any]) -> list[str]:
    """The texts of the tool-progress status updates."""
    return [
        status_text_of(event.status_update.status.message)
        for event in events
        if event.HasField("status_update")
        and any(
            part.HasField("data") and MessageToDict(part.data).get("kind") == "tool-progress"
            for part in event.status_update.status.message.parts
        )
    ]


def data_parts(events: list[Any]) -> list[dict[str, Any]]:
    return [
        MessageToDict(part.data)
        for event in events
        if event.HasField("status_update")
        for part in event.status_update.status.message.parts
        if part.HasField("data")
    ]


# -- two hubs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("credential", ["api_key", "bearer"])
async def test_a_persona_consults_a_persona_of_another_hub_with_an_api_key(
    hub_factory: HubFactory,
    llm: FakeLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    credential: str,
) -> None:
    """The key goes in the header the other hub's card names (``X-API-Key``), or as a
    bearer token; ``${HUB_B_KEY}`` is read from the environment."""
    keys = json.dumps([{"name": "hub-a", "key": HUB_B_KEY}])
    monkeypatch.setenv("HUB_B_KEY", HUB_B_KEY)
    async with other_hub(hub_factory, tmp_path, api_keys=keys, a2a_access="authenticated") as b:
        auth = {credential: "${HUB_B_KEY}"}
        agents = {"socrates": {"card_url": card_url(b, "socrates"), "auth": auth}}
        async with caller_hub(hub_factory, tmp_path, agents) as a:
            llm.script(
                ToolCalls([("agent__socrates", {"message": "What is virtue?"})]),
                Reply("Virtue is knowledge."),  # Socrates, on hub B
                Reply("Socrates says virtue is knowledge."),  # Cal, on hub A
            )
            events = await stream(await a.client("caller", streaming=True), "Ask Socrates.")
            samples = await scrape(a)

    task = events[-1].status_update
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text_of(task.status.message) == "Socrates says virtue is knowledge."
    first, socrates, last = llm.requests
    assert "Socrates" in offered(first)["agent__socrates"]  # described by hub B's card
    assert socrates["messages"][-1] == {"role": "user", "content": "What is virtue?"}
    assert tool_results(last) == ["Virtue is knowledge."]
    progress = [d for d in data_parts(events) if d.get("kind") == "tool-progress"]
    assert progress
    assert {d["agent"] for d in progress} == {"socrates"}
    result = next(d for d in data_parts(events) if d.get("kind") == "tool-result")
    assert result["isError"] is False
    assert result["state"] == "completed"
    assert result["taskId"]
    assert value(samples, CALLS, agent="socrates", outcome="ok") == 1
    assert value(samples, BREAKER, agent="socrates") == 0


async def test_a_persona_consults_another_hub_with_an_oauth2_token(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, issuer: OidcIssuer
) -> None:
    issuer.clients["hub-a"] = "hub-a-secret"
    before = issuer.token_requests
    oidc = {"oidc_issuer": issuer.issuer, "oidc_audience": AUDIENCE}
    async with other_hub(hub_factory, tmp_path, a2a_access="authenticated", **oidc) as b:
        oauth2 = {
            "token_url": f"{issuer.issuer}/token",
            "client_id": "hub-a",
            "client_secret": "hub-a-secret",
            "scopes": ["a2a"],
        }
        agents = {"socrates": {"card_url": card_url(b, "socrates"), "auth": {"oauth2": oauth2}}}
        async with caller_hub(hub_factory, tmp_path, agents) as a:
            client = await a.client("caller")
            for question in ("First?", "Second?"):
                llm.script(
                    ToolCalls([("agent__socrates", {"message": question})]),
                    Reply(f"Socrates on {question}"),
                    Reply("Done."),
                )
                task = await send(client, question)
                assert task.status.state == TaskState.TASK_STATE_COMPLETED
                assert tool_results(llm.requests[-1]) == [f"Socrates on {question}"]

    assert issuer.token_requests - before == 1  # the token is kept until it expires


# -- a real agent that fails, hangs, asks ----------------------------------------------------------


async def test_an_agent_refusing_the_key_is_a_tool_error_and_the_persona_answers(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, agent: ScriptedAgent
) -> None:
    agent.api_key = "right-key"
    agents = {"echo": {"card_url": agent.card_url, "auth": {"api_key": "wrong-key"}}}
    async with caller_hub(hub_factory, tmp_path, agents) as hub:
        llm.script(ToolCalls([("agent__echo", {"message": "Hi"})]), Reply("It would not talk."))
        task = await send(await hub.client("caller"), "Say hi to echo.")
        samples = await scrape(hub)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "It would not talk."
    [error] = tool_results(llm.requests[-1])
    assert error == (
        "Error: the agent 'echo' could not be called: it refused the hub's credentials (HTTP 401)"
    )
    assert agent.headers[0]["x-api-key"] == "wrong-key"
    assert agent.calls == 1  # a refusal is not retried
    assert value(samples, CALLS, agent="echo", outcome="refused") == 1
    assert value(samples, BREAKER, agent="echo") == 0  # nor counted by the breaker


async def test_an_agent_failing_then_recovering_opens_and_half_opens_its_breaker(
    hub_factory: HubFactory,
    llm: FakeLLM,
    tmp_path: Path,
    agent: ScriptedAgent,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two attempts a call (one retry), the breaker opens at 2 failures in a row, and with no
    # cool-down the next attempt is its trial at once.
    agent.fail_next = 3
    config = {"retries": 1, "backoff": 0, "breaker": {"threshold": 2, "cool_down": 0}}
    agents = {"echo": {"card_url": agent.card_url, **config}}
    caplog.set_level(logging.INFO, logger="persona_agent.collab.agent_tools")
    async with caller_hub(hub_factory, tmp_path, agents) as hub:
        client = await hub.client("caller")
        llm.script(ToolCalls([("agent__echo", {"message": "one"})]), Reply("Echo is down."))
        down = await send(client, "Try echo.")
        llm.script(ToolCalls([("agent__echo", {"message": "two"})]), Reply("Echo is back."))
        back = await send(client, "Try echo again.")
        samples = await scrape(hub)

    assert answer_text(down) == "Echo is down."  # the persona answers all the same
    assert llm.requests[1]["messages"][-1]["content"] == (
        "Error: the agent 'echo' could not be called: it answered HTTP 503"
    )
    assert answer_text(back) == "Echo is back."
    assert tool_results(llm.requests[-1]) == ["Echo: two"]
    # 503, 503 (open) | trial: 503 (open again), retry as the next trial: answered (closed)
    assert agent.calls == 4
    assert agent.messages == ["two"]
    changes = [r.getMessage() for r in caplog.records if "circuit breaker" in r.getMessage()]
    assert "breaker open after 2 failed attempts" in changes[0]
    assert [c.split("circuit breaker ")[1].split(" ")[0] for c in changes[1:]] == [
        "half-open",
        "open",
        "half-open",
        "closed",
    ]
    assert value(samples, CALLS, agent="echo", outcome="error") == 1
    assert value(samples, CALLS, agent="echo", outcome="ok") == 1
    assert value(samples, RETRIES, agent="echo") == 2
    assert value(samples, BREAKER, agent="echo") == 0
    assert agent.card_requests == 1  # read at start-up, not again within card_refresh


async def test_an_open_breaker_fails_calls_at_once_naming_when_it_retries(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, agent: ScriptedAgent
) -> None:
    agent.fail_next = 100
    config = {"retries": 0, "breaker": {"threshold": 1, "cool_down": 3600}}
    agents = {"echo": {"card_url": agent.card_url, **config}}
    async with caller_hub(hub_factory, tmp_path, agents) as hub:
        client = await hub.client("caller")
        for _ in range(2):
            llm.script(ToolCalls([("agent__echo", {"message": "hello"})]), Reply("No echo."))
            task = await send(client, "Try echo.")
            assert answer_text(task) == "No echo."
        samples = await scrape(hub)

    assert agent.calls == 1  # the second call never reached it
    assert tool_results(llm.requests[-1]) == [
        "Error: the agent 'echo' is not called for now: its last 1 attempts failed; it is "
        "tried again in 3600 s"
    ]
    assert value(samples, BREAKER, agent="echo") == 2
    assert value(samples, CALLS, agent="echo", outcome="breaker_open") == 1


async def test_a_slow_agent_times_out_and_its_task_is_canceled(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, agent: ScriptedAgent
) -> None:
    agent.hang = True
    agents = {"echo": {"card_url": agent.card_url, "timeout": 0.5}}
    async with caller_hub(hub_factory, tmp_path, agents) as hub:
        llm.script(ToolCalls([("agent__echo", {"message": "slowly"})]), Reply("Echo is slow."))
        task = await send(await hub.client("caller"), "Try echo.")
        samples = await scrape(hub)

    assert answer_text(task) == "Echo is slow."
    assert tool_results(llm.requests[-1]) == [
        "Error: the agent 'echo' could not be called: the agent 'echo' did not answer within 0.5 s"
    ]
    assert agent.calls == 2
    assert len(agent.canceled) == 1
    assert value(samples, CALLS, agent="echo", outcome="timeout") == 1
    assert value(samples, RETRIES, agent="echo") == 0  # it may still be working: no retry


async def test_canceling_the_task_cancels_the_agents_task(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, agent: ScriptedAgent
) -> None:
    agent.hang = True
    async with caller_hub(hub_factory, tmp_path, {"echo": {"card_url": agent.card_url}}) as hub:
        client = await hub.client("caller")
        llm.script(ToolCalls([("agent__echo", {"message": "forever"})]), Reply("unused"))
        task_id = await submit(client, "Ask echo.")
        assert await asyncio.to_thread(agent.received.wait, 10)
        await client.cancel_task(CancelTaskRequest(id=task_id))
        assert await asyncio.to_thread(agent.cancel_received.wait, 10)
        await wait_for_state(client, task_id, TaskState.TASK_STATE_CANCELED)
        samples = await scrape(hub)

    assert len(agent.canceled) == 1
    assert value(samples, CALLS, agent="echo", outcome="canceled") == 1
    assert value(samples, BREAKER, agent="echo") == 0  # a cancel says nothing of its health


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_agents_question_is_relayed_to_the_user_and_the_answer_goes_back(
    hub_factory: HubFactory,
    llm: FakeLLM,
    tmp_path: Path,
    agent: ScriptedAgent,
    transport: tuple[str, str],
) -> None:
    agent.question = "Which year?"
    async with caller_hub(hub_factory, tmp_path, {"echo": {"card_url": agent.card_url}}) as hub:
        client = await hub.client("caller", transport)
        llm.script(ToolCalls([("agent__echo", {"message": "Look up the landing."})]))
        asked = await send(client, "When did they land?")
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert status_text(asked) == "Scripted Agent asks: Which year?"
        assert len(llm.requests) == 1  # the question ends the turn, with no other model call

        llm.script(Reply("They landed in 1969."))
        answered = await answer(client, asked, "1969")

    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text(answered) == "They landed in 1969."
    assert agent.messages == ["Look up the landing.", "1969"]  # one remote task, continued
    resumed = llm.requests[-1]["messages"]
    call = next(m for m in reversed(resumed) if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "agent__echo"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"message": "1969"}
    assert resumed[-1] == {
        "role": "tool",
        "tool_call_id": call["tool_calls"][0]["id"],
        "content": "Thanks: 1969",
    }
    said = [m["content"] for m in resumed if m["role"] in ("user", "assistant") and m["content"]]
    assert said == ["When did they land?", "Scripted Agent asks: Which year?", "1969"]


async def test_a_question_ends_a_streamed_turn_and_the_streamed_answer_goes_back(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, agent: ScriptedAgent
) -> None:
    agent.question = "Which year?"
    async with caller_hub(hub_factory, tmp_path, {"echo": {"card_url": agent.card_url}}) as hub:
        client = await hub.client("caller", streaming=True)
        llm.script(ToolCalls([("agent__echo", {"message": "Look up the landing."})]))
        events = await stream(client, "When did they land?")
        asked = events[-1].status_update
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert status_text_of(asked.status.message) == "Scripted Agent asks: Which year?"

        llm.script(Reply("They landed in 1969."))
        message = Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            parts=[Part(text="1969")],
            task_id=asked.task_id,
            context_id=asked.context_id,
        )
        request = SendMessageRequest(message=message)
        async with asyncio.timeout(30):
            answered = [r async for r in client.send_message(request)]

    done = answered[-1].status_update
    assert done.task_id == asked.task_id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert "".join(progress_texts(answered)) == "Thanks: 1969"  # streamed as it came
    assert agent.messages == ["Look up the landing.", "1969"]


async def answer(client: Client, task: Task, text: str) -> Task:
    """Send ``text`` as the next message of ``task`` (the answer to its question)."""
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=[Part(text=text)],
        task_id=task.id,
        context_id=task.context_id,
    )
    responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
    assert responses[-1].HasField("task"), responses
    return responses[-1].task


@pytest.mark.parametrize("bindings", [("HTTP+JSON", "JSONRPC"), ("JSONRPC", "HTTP+JSON")])
async def test_the_binding_the_card_prefers_is_used_and_the_card_revalidated(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, bindings: tuple[str, ...]
) -> None:
    with ScriptedAgent(bindings=bindings) as agent:
        agents = {"echo": {"card_url": agent.card_url, "card_refresh": 0}}
        async with caller_hub(hub_factory, tmp_path, agents) as hub:
            client = await hub.client("caller")
            for word in ("one", "two"):
                llm.script(ToolCalls([("agent__echo", {"message": word})]), Reply("Heard."))
                await send(client, "Echo this.")
                assert tool_results(llm.requests[-1]) == [f"Echo: {word}"]

    expected = "/message:stream" if bindings[0] == "HTTP+JSON" else "/"
    assert agent.paths == [expected, expected]
    # Read at start-up, then checked before each call: unchanged, with If-None-Match.
    assert (agent.card_requests, agent.card_not_modified) == (3, 2)


# -- start-up --------------------------------------------------------------------------------------


async def test_a_persona_naming_an_unknown_agent_is_a_warning(
    hub_factory: HubFactory, tmp_path: Path, agent: ScriptedAgent, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_agents(tmp_path, {"echo": {"card_url": agent.card_url}}, ["echo", "nobody"])
    async with hub_factory(agents_file=path, mcp_config=None) as hub:
        assert (await hub.http.get("/a2a/caller/.well-known/agent-card.json")).status_code == 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "Persona caller: agents names the outside agent 'nobody', which is not configured "
        "(configured: echo)" in w
        for w in warnings
    )


def test_a_bad_agents_file_stops_start_up_naming_the_file_and_field(
    tmp_path: Path, personas_dir: Path
) -> None:
    path = write_agents(tmp_path, {"echo": {"card_url": "ftp://x", "retries": -1}}, ["echo"])
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        personas_dir=personas_dir,
        data_dir=tmp_path / "data",
        llm_base_url="http://127.0.0.1:9/v1",
        agents_file=path,
    )
    with pytest.raises(ConfigError) as refused:
        create_app(settings)
    message = refused.value.message
    assert message.startswith(f"{path}: ")
    assert "agent 'echo', field card_url: must start with http:// or https://" in message
    assert "agent 'echo', field retries" in message


def status_text_of(message: Message) -> str:
    return "".join(part.text for part in message.parts if part.HasField("text"))


# -- the breaker on a clock of the test's own ------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)  # and no time passes: the test moves it


async def ask(agents: RemoteAgents, persona: Persona, text: str) -> list[ToolUpdate]:
    turn = Turn(persona_id=persona.id, conversation="c1", task_id=str(uuid.uuid4()))
    return [update async for update in agents.call(persona, "agent__echo", {"message": text}, turn)]


async def test_the_breaker_half_opens_after_its_cool_down(agent: ScriptedAgent) -> None:
    """The tool source alone, against the real agent, on a clock the test moves."""
    config = parse_agents_config(
        {
            "agents": {
                "echo": {
                    "card_url": agent.card_url,
                    "retries": 2,
                    "backoff": 1,
                    "breaker": {"threshold": 3, "cool_down": 30},
                }
            }
        },
        {},
    )
    clock, metrics = Clock(), HubMetrics()
    agents = RemoteAgents(config, metrics=metrics, clock=clock, sleep=clock.sleep)
    persona = Persona.model_validate({**CALLER, "id": "caller", "agents": ["echo"]})

    def breaker() -> float | None:
        return metrics.registry.get_sample_value(BREAKER, {"agent": "echo"})

    try:
        agent.fail_next = 3
        with pytest.raises(ToolError, match="it answered HTTP 503"):
            await ask(agents, persona, "one")  # 3 attempts, 3 failures: open
        # Backoff: 1 s, then 2 s, each with jitter (half to all of it).
        assert len(clock.slept) == 2
        assert 0.5 <= clock.slept[0] <= 1 <= clock.slept[1] <= 2
        assert breaker() == 2
        clock.now += 3
        with pytest.raises(
            ToolError, match="its last 3 attempts failed; it is tried again in 27 s"
        ):
            await ask(agents, persona, "two")
        assert agent.calls == 3  # refused at once
        clock.now += 27
        updates = await ask(agents, persona, "three")  # the trial, which succeeds
        assert isinstance(updates[-1], ToolResult)
        assert updates[-1].text == "Echo: three"
        assert [u.text for u in updates[:-1]] == ["Echo: ", "three"]  # streamed as progress
        assert breaker() == 0
        assert agent.calls == 4
    finally:
        await agents.aclose()
