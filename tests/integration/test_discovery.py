"""Cards and discovery: per-persona cards, the aggregate, the hub card, the list, 404s."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from persona_agent.personas.scan import load_persona_dir
from tests.integration.conftest import BUNDLED, Hub, HubFactory

BUNDLED_PERSONAS, _ = load_persona_dir(BUNDLED)


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def test_every_bundled_persona_has_a_card_with_domain_skills(hub: Hub) -> None:
    assert len(BUNDLED_PERSONAS) >= 4
    for persona in BUNDLED_PERSONAS.values():
        response = await hub.http.get(f"/a2a/{persona.id}/.well-known/agent-card.json")
        assert response.status_code == 200
        card = response.json()
        assert card["name"] == persona.name
        skill_ids = [skill["id"] for skill in card["skills"]]
        expected = [f"{persona.id}-conversation"] + [
            f"{persona.id}-{persona.domain_slug(domain)}" for domain in persona.knowledge_domains
        ]
        assert skill_ids == expected
        assert card["capabilities"]["streaming"] is True
        assert card["capabilities"]["pushNotifications"] is True  # tests/integration/test_push.py


async def test_card_interfaces_use_public_base_url_and_work_as_written(hub: Hub) -> None:
    card = (await hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
    base = hub.settings.public_base_url
    interfaces = {
        (i["protocolBinding"], i["protocolVersion"]): i["url"] for i in card["supportedInterfaces"]
    }
    assert interfaces == {
        ("JSONRPC", "1.0"): f"{base}/a2a/socrates/",
        ("JSONRPC", "0.3"): f"{base}/a2a/socrates/",
        ("HTTP+JSON", "1.0"): f"{base}/a2a/socrates",
        ("HTTP+JSON", "0.3"): f"{base}/a2a/socrates",
    }
    # The JSON-RPC URL answers a JSON-RPC call as written (no redirect).
    response = await hub.http.post(
        interfaces[("JSONRPC", "1.0")],
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}},
        headers={"A2A-Version": "1.0"},
    )
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32001  # TaskNotFound
    # The HTTP+JSON URL answers below it as written.
    response = await hub.http.get(
        f"{interfaces[('HTTP+JSON', '1.0')]}/tasks/nope", headers={"A2A-Version": "1.0"}
    )
    assert response.status_code == 404


async def test_public_base_url_setting_changes_card_urls(hub_factory) -> None:  # type: ignore[no-untyped-def]
    async with hub_factory(public_base_url="https://personas.example.org/") as hub:
        card = (await hub.http.get("/a2a/ada-lovelace/.well-known/agent-card.json")).json()
        urls = {i["url"] for i in card["supportedInterfaces"]}
        assert urls == {
            "https://personas.example.org/a2a/ada-lovelace/",
            "https://personas.example.org/a2a/ada-lovelace",
        }


async def test_card_has_etag_and_cache_control(hub: Hub) -> None:
    url = "/a2a/marie-curie/.well-known/agent-card.json"
    first = await hub.http.get(url)
    etag = first.headers["etag"]
    assert "max-age" in first.headers["cache-control"]
    again = await hub.http.get(url, headers={"If-None-Match": etag})
    assert again.status_code == 304


async def test_aggregate_card_lists_every_persona(hub: Hub) -> None:
    body = (await hub.http.get("/.well-known/agent.json")).json()
    names = sorted(card["name"] for card in body["agents"])
    assert len(names) == len(BUNDLED_PERSONAS) + 2  # plus the two test personas
    assert {p.name for p in BUNDLED_PERSONAS.values()} <= set(names)
    assert body["hub"]["name"] == "persona-agent hub"


async def test_aggregate_card_has_an_etag_that_follows_the_personas(
    hub_factory: HubFactory,
) -> None:
    newton = {"name": "Isaac Newton", "description": "Natural philosopher."}
    async with hub_factory(mcp_config=None) as hub:
        first = await hub.http.get("/.well-known/agent.json")
        etag = first.headers["etag"]
        assert "max-age" in first.headers["cache-control"]
        again = await hub.http.get("/.well-known/agent.json", headers={"If-None-Match": etag})
        assert (again.status_code, again.headers["etag"], again.content) == (304, etag, b"")
        created = await hub.http.post("/api/v1/personas", json={"id": "newton", **newton})
        assert created.status_code == 201, created.text
        added = await hub.http.get("/.well-known/agent.json", headers={"If-None-Match": etag})
        assert added.status_code == 200
        assert added.headers["etag"] != etag
        assert "Isaac Newton" in {card["name"] for card in added.json()["agents"]}


async def test_hub_card_and_persona_list(hub: Hub) -> None:
    hub_card = (await hub.http.get("/.well-known/agent-card.json")).json()
    assert hub_card["name"] == "persona-agent hub"
    # The card of the hub's directory agent (tests/integration/test_directory.py): one
    # skill, naming every persona; not a skill per persona, which it does not answer as.
    (skill,) = hub_card["skills"]
    assert skill["id"] == "directory"
    assert all(f"{p.name} ({pid})" in skill["description"] for pid, p in BUNDLED_PERSONAS.items())

    listing = (await hub.http.get("/a2a/personas")).json()
    by_id = {row["id"]: row for row in listing}
    assert set(BUNDLED_PERSONAS) <= set(by_id)
    einstein = by_id["albert-einstein"]
    assert einstein["name"] == "Albert Einstein"
    card = await hub.http.get(einstein["cardUrl"])
    assert card.status_code == 200
    assert card.json()["name"] == "Albert Einstein"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/a2a/nobody/.well-known/agent-card.json"),
        ("POST", "/a2a/nobody/"),
        ("POST", "/a2a/nobody"),
        ("POST", "/a2a/nobody/message:send"),
        ("GET", "/a2a/nobody/tasks/123"),
    ],
)
async def test_unknown_persona_is_a_json_404_on_every_path(
    hub: Hub, method: str, path: str
) -> None:
    response = await hub.http.request(method, path, json={} if method == "POST" else None)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "persona_not_found"


async def test_a2a_answers_the_same_behind_a_proxy_root_path(hub: Hub) -> None:
    """A2A requests skip FastAPI's stack; behind a root path they go through its mount."""
    for root in ("", "/proxy"):
        transport = httpx.ASGITransport(app=hub.app, root_path=root)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            card = await http.get(f"{root}/a2a/socrates/.well-known/agent-card.json")
            assert card.status_code == 200
            assert card.json()["name"] == "Socrates"
            listed = await http.get(f"{root}/a2a/personas")
            assert "socrates" in [p["id"] for p in listed.json()]
            missing = await http.get(f"{root}/a2a/nobody/.well-known/agent-card.json")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "persona_not_found"
            answer = await http.post(
                f"{root}/a2a/socrates/",
                json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}},
                headers={"A2A-Version": "1.0"},
            )
            assert answer.json()["error"]["code"] == -32001  # TaskNotFound


async def test_readyz_names_the_database_personas_and_model(hub: Hub) -> None:
    answer = await hub.http.get("/readyz")
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "ready"
    assert body["notReady"] == []
    assert body["database"] == "ok"
    assert body["personas"] == len((await hub.http.get("/a2a/personas")).json())
    assert body["llm"] == {"backend": "openai", "model": hub.settings.llm_model}


async def test_readyz_names_a_damaged_model_file_and_the_hub_keeps_serving(
    hub_factory: HubFactory, tmp_path: Path
) -> None:
    """An embedded model file that llama.cpp refuses: not ready, with the reason naming
    the file; the rest of the hub answers (start-up loads nothing: no preload)."""
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"GGUF" + bytes(range(256)) * 16)  # the magic, then no model
    local = {"llm_backend": "local", "local_model": str(damaged), "local_preload": False}
    async with hub_factory(**local) as hub:
        async with asyncio.timeout(60):
            for _ in range(10_000):  # the first probe starts the load, which fails soon
                body = (await hub.http.get("/readyz")).json()
                if "error" in body["llm"]:
                    break
                await asyncio.sleep(0.05)
        assert body["notReady"] == ["llm"]
        assert body["llm"]["model"] == "damaged"
        assert f"PERSONA_AGENT_LOCAL_MODEL names {damaged}" in body["llm"]["error"]
        assert "llama.cpp could not load" in body["llm"]["error"]
        assert (await hub.http.get("/a2a/personas")).status_code == 200


async def test_cards_name_the_provider_the_settings_give(hub_factory: HubFactory) -> None:
    async with hub_factory() as hub:
        card = (await hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
        # By default the hub itself, never a project of the same name elsewhere.
        assert card["provider"] == {"organization": "persona-agent", "url": hub.settings.base_url}
    settings = {"provider_organization": "Acme Personas", "provider_url": "https://acme.example"}
    async with hub_factory(**settings) as hub:
        card = (await hub.http.get("/a2a/socrates/.well-known/agent-card.json")).json()
        hub_card = (await hub.http.get("/.well-known/agent-card.json")).json()
    expected = {"organization": "Acme Personas", "url": "https://acme.example"}
    assert card["provider"] == hub_card["provider"] == expected
