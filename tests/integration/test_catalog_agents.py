"""Outside agents from an AI Catalog (the agents file's ``catalogs:``): a persona of one hub
calls a persona of a second hub that its signed catalog lists; a catalog that is down at
start-up is logged and read again when one of its agents is called; a bad entry names the
file, the catalog and the field."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from a2a.types.a2a_pb2 import TaskState
from cryptography.hazmat.primitives.asymmetric import ec
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from persona_agent.api.app import create_app
from persona_agent.chat.tools import ToolResult, Turn
from persona_agent.collab.agent_tools import RemoteAgents
from persona_agent.collab.agents_file import parse_agents_config
from persona_agent.errors import ConfigError
from persona_agent.personas.model import Persona
from persona_agent.settings import Settings
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.integration.a2a_helpers import stream
from tests.integration.conftest import HubFactory, loopback_socket, serving
from tests.integration.test_card_signing import pem
from tests.integration.test_remote_agents import (
    CALLER,
    Clock,
    offered,
    other_hub,
    status_text_of,
    tool_results,
)

CATALOG = "/.well-known/ai-catalog.json"


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers: the tools called here are outside agents."""
    return None


async def catalog_read(caplog: pytest.LogCaptureFixture, name: str) -> logging.LogRecord:
    """The log record of the catalog ``name``'s agents brought in, once it comes."""
    async with asyncio.timeout(30):
        while True:
            for record in caplog.records:
                if f"Agents file, catalog {name!r}: " in record.getMessage() and (
                    "outside agent(s) from" in record.getMessage()
                ):
                    return record
            await asyncio.sleep(0.01)


async def test_a_persona_calls_an_agent_of_a_signed_catalog(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "persona_agent.collab")
    key = pem(ec.generate_private_key(ec.SECP256R1()), tmp_path / "card.pem")
    async with other_hub(hub_factory, tmp_path, card_signing_key=key) as b:
        catalogs = {"lab": {"url": f"{b.settings.base_url}{CATALOG}", "signed": True}}
        path = tmp_path / "agents.yaml"
        path.write_text(yaml.safe_dump({"catalogs": catalogs}), encoding="utf-8")
        (tmp_path / "personas" / "caller.yaml").write_text(
            yaml.safe_dump({**CALLER, "agents": ["lab-socrates"]}), encoding="utf-8"
        )
        async with hub_factory(agents_file=path, mcp_config=None) as a:
            await catalog_read(caplog, "lab")  # in the background: the hub did not wait
            llm.script(
                ToolCalls([("agent__lab-socrates", {"message": "What is virtue?"})]),
                Reply("Virtue is knowledge."),  # Socrates, on hub B
                Reply("Socrates says virtue is knowledge."),  # Cal, on hub A
            )
            events = await stream(await a.client("caller", streaming=True), "Ask Socrates.")
    task = events[-1].status_update
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert status_text_of(task.status.message) == "Socrates says virtue is knowledge."
    first, socrates, last = llm.requests
    assert "Socrates" in offered(first)["agent__lab-socrates"]  # described by its card
    assert socrates["messages"][-1] == {"role": "user", "content": "What is virtue?"}
    assert tool_results(last) == ["Virtue is knowledge."]


async def test_a_catalog_down_at_start_up_is_read_again_when_its_agent_is_called(
    hub_factory: HubFactory, llm: FakeLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with other_hub(hub_factory, tmp_path) as b:
        document = (await b.http.get(CATALOG)).json()
        state = {"up": False}

        async def catalog(_request: Request) -> Response:
            if not state["up"]:
                return Response(status_code=503)
            return JSONResponse(document, media_type="application/ai-catalog+json")

        sock, base_url = loopback_socket()
        server = FastAPI()
        server.add_route(CATALOG, catalog)
        async with serving(server, sock):
            clock = Clock()
            config = parse_agents_config(
                {"catalogs": {"lab": {"url": f"{base_url}{CATALOG}", "exclude": ["marie-curie"]}}},
                {},
            )
            # The catalog lists hub B's agents, not at the catalog's origin: allowed here.
            hub_b = urlsplit(b.settings.base_url).netloc
            agents = RemoteAgents(config, clock=clock, sleep=clock.sleep, allowed_hosts=[hub_b])
            caller = Persona.from_data("caller", {**CALLER, "agents": ["lab-socrates"]})
            try:
                await agents.start()
                await agents.catalogs.settled()  # read in the background
                assert agents.names() == []
                assert any(
                    "Agents file, catalog 'lab':" in r.getMessage()
                    and "answered HTTP 503; read again when one of its agents is called"
                    in r.getMessage()
                    for r in caplog.records
                    if r.levelno == logging.WARNING
                )
                state["up"] = True
                clock.now += 30  # the catalog's retry interval, as a card's
                llm.script(Reply("Virtue is knowledge."))
                turn = Turn(persona_id="caller", conversation="c1", task_id=str(uuid.uuid4()))
                updates = [
                    u
                    async for u in agents.call(
                        caller, "agent__lab-socrates", {"message": "What is virtue?"}, turn
                    )
                ]
                assert "lab-ada-lovelace" in agents.names()
                assert "lab-marie-curie" not in agents.names()  # excluded
            finally:
                await agents.aclose()
    assert isinstance(updates[-1], ToolResult)
    assert updates[-1].text == "Virtue is knowledge."


def test_a_bad_catalog_entry_stops_start_up_naming_the_file_catalog_and_field(
    tmp_path: Path, personas_dir: Path
) -> None:
    path = tmp_path / "agents.yaml"
    catalogs = {"lab": {"url": "ftp://x", "prefix": "no spaces"}}
    path.write_text(yaml.safe_dump({"catalogs": catalogs}), encoding="utf-8")
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
    assert "catalog 'lab', field url: must start with http:// or https://" in message
    assert "catalog 'lab', field prefix" in message
