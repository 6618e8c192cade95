"""A catalog of the agents file as an attacker writes it (issue 46, item 6), served by a raw
HTTP server on 127.0.0.1: entries the hub cannot use, brackets nested 100,000 deep, 50 MB
streamed without end, an answer that never comes, and agents that point inward (loopback,
the cloud metadata address). The hub starts every time and serves the rest; it reads no
more than its limits; it calls no inner address and sends the catalog's key to the
catalog's own origin alone."""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from persona_agent.a2a.discovery.ai_catalog import A2A_CARD_TYPE
from persona_agent.chat.tools import ToolResult, Turn
from persona_agent.collab.agent_tools import RemoteAgents
from persona_agent.collab.agents_file import parse_agents_config
from persona_agent.errors import ToolError
from persona_agent.personas.model import Persona
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import stream
from tests.integration.conftest import HubFactory
from tests.integration.test_remote_agents import (
    CALLER,
    other_hub,
    status_text_of,
    tool_results,
)
from tests.servers.a2a_agent import ScriptedAgent
from tests.servers.raw_http import RawHttp

CATALOG = "/.well-known/ai-catalog.json"
KEY = "catalog-key-0123456789"


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers: the tools called here are outside agents."""
    return None


@pytest.fixture
def agent() -> Any:
    with ScriptedAgent() as running:
        yield running


def agents_file(tmp_path: Path, catalog_url: str, caller: list[str], **catalog: Any) -> Path:
    """The agents file with the catalog ``lab``, and the persona ``caller`` who may call
    ``caller``."""
    path = tmp_path / "agents.yaml"
    catalogs = {"lab": {"url": catalog_url, **catalog}}
    path.write_text(yaml.safe_dump({"catalogs": catalogs}), encoding="utf-8")
    (tmp_path / "personas" / "caller.yaml").write_text(
        yaml.safe_dump({**CALLER, "agents": caller}), encoding="utf-8"
    )
    return path


def entry(name: str, identifier: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "identifier": identifier or f"urn:agent:{name.lower()}",
        "displayName": name,
        "mediaType": A2A_CARD_TYPE,
        **fields,
    }


def catalog_of(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"specVersion": "1.0", "entries": list(entries)}


async def logged(caplog: pytest.LogCaptureFixture, *texts: str) -> logging.LogRecord:
    """The first log record holding every one of ``texts``, once it comes (the catalogs
    are read in the background)."""
    async with asyncio.timeout(60):
        while True:
            for record in caplog.records:
                if all(text in record.getMessage() for text in texts):
                    return record
            await asyncio.sleep(0.01)


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


async def test_entries_it_cannot_use_are_skipped_with_a_warning_and_the_others_are_served(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "persona_agent.collab")
    async with other_hub(hub_factory, tmp_path) as b, RawHttp() as server:
        document = (await b.http.get(CATALOG)).json()
        socrates = next(e for e in document["entries"] if e["displayName"] == "Socrates")
        server.json(
            CATALOG,
            catalog_of(
                entry("Socrates", data=socrates["data"]),  # a URN identifier, the card inline
                entry("Ghost"),  # a URN identifier, and neither url nor data
                entry("Nameless", displayName=42, data=socrates["data"]),
                entry("Elsewhere", url="urn:agent:elsewhere"),
                entry("Twice", url="https://x.example/card.json", data={}),
            ),
        )
        path = agents_file(tmp_path, server.base_url + CATALOG, ["lab-socrates"])
        hub_b = urlsplit(b.settings.base_url).netloc  # Socrates is at hub B, not the catalog
        async with hub_factory(
            agents_file=path, mcp_config=None, agent_url_allowed_hosts=hub_b
        ) as a:
            await logged(caplog, "Agents file, catalog 'lab': 1 outside agent(s)", "lab-socrates")
            assert (await a.http.get("/readyz")).status_code == 200
            llm.script(
                ToolCalls([("agent__lab-socrates", {"message": "What is virtue?"})]),
                Reply("Virtue is knowledge."),  # Socrates, on hub B
                Reply("Socrates says virtue is knowledge."),  # Cal, on hub A
            )
            events = await stream(await a.client("caller", streaming=True), "Ask Socrates.")
    final = events[-1].status_update
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text_of(final.status.message) == "Socrates says virtue is knowledge."
    assert tool_results(llm.requests[-1]) == ["Virtue is knowledge."]
    warnings = messages(caplog, logging.WARNING)
    skipped = "Agents file, catalog 'lab': skipped the entry entries[{}] ('urn:agent:{}'): {}"
    for index, name, why in (
        (1, "ghost", "exactly one of url and data is required"),
        (2, "nameless", "field displayName is required (a string)"),
        (3, "elsewhere", "field url must be an http(s) URL"),
        (4, "twice", "exactly one of url and data is required"),
    ):
        assert skipped.format(index, name, why) in warnings


@pytest.mark.parametrize("depth", [40, 100_000], ids=["past-the-limit", "past-the-parser"])
async def test_a_deeply_nested_catalog_is_refused_and_the_hub_starts(
    depth: int, hub_factory: HubFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nested = b"[" * depth + b"]" * depth  # 100,000 deep: 0.2 MB, a RecursionError before
    body = b'{"specVersion": "1.0", "entries": [{"data": %s}]}' % nested
    async with RawHttp() as server:
        server.body(CATALOG, body)
        path = agents_file(tmp_path, server.base_url + CATALOG, ["lab-anyone"])
        async with hub_factory(agents_file=path, mcp_config=None) as a:
            record = await logged(caplog, "catalog 'lab'", "PERSONA_AGENT_CATALOG_MAX_DEPTH")
            assert (await a.http.get("/readyz")).status_code == 200
    assert record.levelno == logging.ERROR
    assert "its lists and objects nest more than 32 deep" in record.getMessage()


@pytest.mark.parametrize("declared", [None, 318 * 1024 * 1024], ids=["chunked", "declared"])
async def test_an_oversized_catalog_is_cut_at_the_limit_and_the_hub_starts(
    declared: int | None, hub_factory: HubFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    chunk = b" " * 65536
    total = 50 * 1024 * 1024  # from a generator: never held whole, by either side
    async with RawHttp() as server:
        server.stream(
            CATALOG, itertools.repeat(chunk, total // len(chunk)), content_length=declared
        )
        path = agents_file(tmp_path, server.base_url + CATALOG, ["lab-anyone"])
        async with hub_factory(
            agents_file=path, mcp_config=None, catalog_max_bytes=1024 * 1024
        ) as a:
            record = await logged(caplog, "catalog 'lab'", "PERSONA_AGENT_CATALOG_MAX_BYTES")
            answer = server.answers[CATALOG]
            async with asyncio.timeout(60):
                await answer.cut.wait()  # the hub hung up
            assert (await a.http.get("/readyz")).status_code == 200
    assert not answer.done.is_set()
    # The limit, and what the sockets' buffers took on both sides (~5 MB here; loopback
    # buffers may grow to tens of MB): never the 50 MB, which the server had to drain.
    assert answer.sent < total // 2
    if declared is None:
        assert "it has more than 1,048,576 bytes, the limit" in record.getMessage()
    else:
        assert "it has 333,447,168 bytes, more than the limit of 1,048,576" in (record.getMessage())


async def test_a_catalog_of_too_many_entries_is_refused(
    hub_factory: HubFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with RawHttp() as server:
        many = [entry(f"Agent {n}", url=f"https://x.example/{n}.json") for n in range(6)]
        server.json(CATALOG, catalog_of(*many))
        path = agents_file(tmp_path, server.base_url + CATALOG, ["lab-agent-1"])
        async with hub_factory(agents_file=path, mcp_config=None, catalog_max_entries=5) as a:
            record = await logged(caplog, "catalog 'lab'", "PERSONA_AGENT_CATALOG_MAX_ENTRIES")
            assert (await a.http.get("/readyz")).status_code == 200
    assert "it lists 6 entries, more than the limit of 5" in record.getMessage()


async def test_a_slow_catalog_delays_neither_readiness_nor_answers_and_is_dropped_at_shutdown(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path
) -> None:
    async with RawHttp() as server:
        server.hang(CATALOG, catalog_of())
        path = agents_file(tmp_path, server.base_url + CATALOG, ["lab-anyone"])
        async with hub_factory(agents_file=path, mcp_config=None) as a:
            async with asyncio.timeout(30):  # the hub asked for the catalog ...
                await server.asked.wait()
            # ... and is ready, and answers, while the catalog has not answered
            assert (await a.http.get("/readyz")).status_code == 200
            llm.script(Reply("Virtue is knowledge."))
            events = await stream(await a.client("socrates", streaming=True), "What is virtue?")
            assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
            assert not server.answers[CATALOG].done.is_set()
            assert not server.answers[CATALOG].cut.is_set()
        async with asyncio.timeout(30):  # stopping, the hub gave up the read
            await server.answers[CATALOG].cut.wait()
    assert not server.answers[CATALOG].done.is_set()


def _interfaces_at(card: dict[str, Any], url: str) -> dict[str, Any]:
    """``card`` with every interface at ``url``."""
    moved = [{**i, "url": url} for i in card["supportedInterfaces"]]
    return {**card, "supportedInterfaces": moved}


async def _call(agents: RemoteAgents, caller: Persona, name: str) -> list[Any]:
    turn = Turn(persona_id="caller", conversation="c1", task_id=str(uuid.uuid4()))
    return [u async for u in agents.call(caller, f"agent__{name}", {"message": "hi"}, turn)]


async def test_agents_a_catalog_points_inward_are_not_called_and_never_get_its_key(
    agent: ScriptedAgent, caplog: pytest.LogCaptureFixture
) -> None:
    card = MessageToDict(agent.card())  # its interfaces at 127.0.0.1, another port
    async with RawHttp() as server:
        server.json(
            CATALOG,
            catalog_of(
                entry("Loopback", data=card),
                entry("By Reference", url=agent.card_url),
                entry("Metadata", data=_interfaces_at(card, "http://169.254.169.254/latest/")),
                entry("Private", data=_interfaces_at(card, "http://10.0.0.7:8080/a2a/")),
            ),
        )
        config = parse_agents_config(
            {"catalogs": {"lab": {"url": server.base_url + CATALOG, "auth": {"api_key": KEY}}}},
            {},
        )
        names = ["lab-loopback", "lab-by-reference", "lab-metadata", "lab-private"]
        caller = Persona.from_data("caller", {**CALLER, "agents": names})
        agents = RemoteAgents(config)  # loopback is not allowed: only the catalog's origin
        refusals = {}
        try:
            await agents.start()
            await agents.catalogs.settled()
            assert sorted(agents.names()) == sorted(names)
            for name in names:
                with pytest.raises(ToolError) as refused:
                    await _call(agents, caller, name)
                refusals[name] = str(refused.value)
        finally:
            await agents.aclose()
    assert agent.calls == 0
    assert agent.card_requests == 0
    assert agent.headers == []
    assert [r.headers.get("x-api-key") for r in server.requests] == [KEY]  # the catalog's own
    where = f"http://127.0.0.1:{agent.port}"
    assert f"its card's interfaces are refused: {where}" in refusals["lab-loopback"]
    assert f"its card at {agent.card_url} may not be read" in refusals["lab-by-reference"]
    assert "refused: http://169.254.169.254:80" in refusals["lab-metadata"]
    assert "refused: http://10.0.0.7:8080" in refusals["lab-private"]
    assert all(
        "PERSONA_AGENT_AGENT_URL_ALLOWED_HOSTS" in r for r in refusals.values() if "card's" in r
    )
    assert any(
        "Agent URL refused: http://169.254.169.254:80 resolves to 169.254.169.254" in m
        for m in messages(caplog, logging.WARNING)
    )


@pytest.mark.parametrize("credited", [False, True], ids=["origin-only", "host-named"])
async def test_the_catalogs_key_goes_to_an_agent_elsewhere_only_when_the_file_names_its_host(
    credited: bool, agent: ScriptedAgent
) -> None:
    card = MessageToDict(agent.card())
    elsewhere = f"127.0.0.1:{agent.port}"  # not the catalog's origin
    async with RawHttp() as server:
        server.json(CATALOG, catalog_of(entry("Echo", data=card)))
        auth: dict[str, Any] = {"api_key": KEY, **({"hosts": [elsewhere]} if credited else {})}
        config = parse_agents_config(
            {"catalogs": {"lab": {"url": server.base_url + CATALOG, "auth": auth}}}, {}
        )
        caller = Persona.from_data("caller", {**CALLER, "agents": ["lab-echo"]})
        agents = RemoteAgents(config, allowed_hosts=[elsewhere])  # may be called there
        try:
            await agents.start()
            await agents.catalogs.settled()
            updates = await _call(agents, caller, "lab-echo")
        finally:
            await agents.aclose()
    assert isinstance(updates[-1], ToolResult)
    assert updates[-1].text == "Echo: hi"
    assert agent.calls >= 1
    sent = {headers.get("x-api-key") for headers in agent.headers}
    assert sent == ({KEY} if credited else {None})
