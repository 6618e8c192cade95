"""The AI Catalog (``/.well-known/ai-catalog.json``) of a running hub: valid against the
specification's schema (tests/discovery), each entry exactly its card, ``ETag``/304, live with
REST changes, the ``Link`` header on pages, cards and lists; and its signed form, which the
hub's own reader verifies and a forged copy fails."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]  # it ships no stubs (it comes with schemathesis)
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from persona_agent.a2a.discovery.catalog_reader import CatalogError, fetch_catalog
from persona_agent.security.card_signing import CardSigner
from persona_agent.security.catalog_signing import (
    CatalogSignatureError,
    verify_catalog,
)
from tests.integration.conftest import HubFactory
from tests.integration.test_card_signing import pem

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "discovery" / "ai_catalog.schema.json").read_text("utf-8")
)
LINK = '</.well-known/ai-catalog.json>; rel="ai-catalog"'
CATALOG = "/.well-known/ai-catalog.json"
NEWTON = {
    "id": "newton",
    "name": "Isaac Newton",
    "description": "Natural philosopher.",
    "personal_background": "Woolsthorpe, then Cambridge.",
    "language_style": {"tone": "exact"},
    "knowledge_domains": {"Optics": ["prisms"]},
}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers: no test here calls a tool."""
    return None


async def test_the_catalog_lists_every_agent_as_its_card_and_follows_changes(
    hub_factory: HubFactory,
) -> None:
    async with hub_factory() as hub:
        response = await hub.http.get(CATALOG)
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/ai-catalog+json"
        assert response.headers["link"] == LINK
        assert response.headers["cache-control"] == "public, max-age=60, must-revalidate"
        catalog = response.json()
        jsonschema.validate(catalog, SCHEMA)
        assert catalog["specVersion"] == "1.0"
        assert catalog["host"] == {
            "displayName": "persona-agent",
            "identifier": hub.settings.base_url,
        }
        entries = {entry["identifier"]: entry for entry in catalog["entries"]}
        base = hub.settings.base_url
        directory = entries.pop(f"{base}/.well-known/agent-card.json")
        assert directory["tags"] == ["directory"]
        ids = sorted(url.removeprefix(f"{base}/a2a/").split("/")[0] for url in entries)
        assert ids == sorted(p["id"] for p in (await hub.http.get("/a2a/personas")).json())
        assert entries[f"{base}/a2a/science-panel/.well-known/agent-card.json"]["tags"] == ["panel"]
        for url, entry in [*entries.items(), (f"{base}/.well-known/agent-card.json", directory)]:
            assert entry["mediaType"] == entry["type"] == "application/a2a-agent-card+json"
            card = await hub.http.get(url)
            assert card.headers["link"] == LINK
            assert entry["data"] == card.json()  # exactly what its card URL serves
            assert entry["displayName"] == card.json()["name"]

        etag = response.headers["etag"]
        again = await hub.http.get(CATALOG, headers={"If-None-Match": etag})
        assert again.status_code == 304
        assert again.headers["etag"] == etag
        assert again.content == b""

        assert (await hub.http.post("/api/v1/personas", json=NEWTON)).status_code == 201
        added = await hub.http.get(CATALOG, headers={"If-None-Match": etag})
        assert added.status_code == 200
        newton = f"{base}/a2a/newton/.well-known/agent-card.json"
        assert newton in {entry["identifier"] for entry in added.json()["entries"]}
        assert (await hub.http.delete("/api/v1/personas/newton")).status_code == 204
        gone = await hub.http.get(CATALOG, headers={"If-None-Match": added.headers["etag"]})
        assert newton not in {entry["identifier"] for entry in gone.json()["entries"]}

        for path in ("/", "/a2a/personas", "/.well-known/agent.json"):
            assert LINK in (await hub.http.get(path)).headers["link"], path
        unsigned = await fetch_catalog(hub.http, f"{base}{CATALOG}")
        assert unsigned.signed is False
        assert {a.name for a in unsigned.agents} >= {"socrates", "ada-lovelace", "science-panel"}
        with pytest.raises(CatalogError, match="is not signed"):
            await fetch_catalog(hub.http, f"{base}{CATALOG}", require_signature=True)


def forged_key_set(jwks: dict[str, Any]) -> dict[str, Any]:
    """The same key id, another key."""
    other = CardSigner(ec.generate_private_key(ec.SECP256R1()), "k1", "https://x.example")
    assert jwks["keys"][0]["kid"] == other.jwks()["keys"][0]["kid"]
    return other.jwks()


async def test_the_signed_catalog_verifies_and_a_forged_one_is_refused(
    hub_factory: HubFactory, tmp_path: Path
) -> None:
    key_file = pem(ec.generate_private_key(ec.SECP256R1()), tmp_path / "card.pem")
    async with hub_factory(card_signing_key=key_file, card_signing_key_id="k1") as hub:
        base = hub.settings.base_url
        signed = await fetch_catalog(hub.http, f"{base}{CATALOG}", require_signature=True)
        assert signed.signed is True
        catalog = (await hub.http.get(CATALOG)).json()
        jwks = (await hub.http.get("/.well-known/jwks.json")).json()
        assert (await hub.http.get("/.well-known/jwks.json")).headers["link"] == LINK
    jsonschema.validate(catalog, SCHEMA)
    assert verify_catalog(catalog, jwks, required=True) is True
    for entry in catalog["entries"]:
        assert entry["trustManifest"]["identity"] == entry["identifier"]
        assert len(entry["data"]["signatures"]) == 1  # the card's own A2A signature, kept

    changed = copy.deepcopy(catalog)
    changed["entries"][1]["data"]["description"] = "A forged description."
    with pytest.raises(CatalogSignatureError, match=r"entries\[1\].*data is not the card"):
        verify_catalog(changed, jwks, required=True)
    renamed = copy.deepcopy(catalog)  # what only the host's manifest covers
    renamed["entries"][1]["displayName"] = "Someone Else"
    with pytest.raises(CatalogSignatureError, match="not the entries the host signed"):
        verify_catalog(renamed, jwks, required=True)
    with pytest.raises(CatalogSignatureError, match=r"host\.trustManifest: the signature does not"):
        verify_catalog(catalog, forged_key_set(jwks), required=True)
    stripped = copy.deepcopy(catalog)
    del stripped["host"]["trustManifest"]
    with pytest.raises(CatalogSignatureError, match="the catalog is not signed"):
        verify_catalog(stripped, jwks, required=True)
    assert verify_catalog(stripped, jwks, required=False) is False
    one_stripped = copy.deepcopy(catalog)
    del one_stripped["entries"][2]["trustManifest"]
    with pytest.raises(CatalogSignatureError, match="not the entries the host signed"):
        verify_catalog(one_stripped, jwks, required=True)
    unknown = {"keys": [{**jwks["keys"][0], "kid": "k2"}]}
    with pytest.raises(CatalogSignatureError, match="key 'k1', which the key set does not hold"):
        verify_catalog(catalog, unknown, required=True)


async def test_a_catalog_that_is_not_one_is_refused_and_a_bad_entry_skipped_naming_the_field() -> (
    None
):
    def serve(request: httpx.Request) -> httpx.Response:
        documents = {
            "/v2.json": {"specVersion": "2.0", "entries": []},
            "/card.json": {"name": "just a card"},
            "/bad.json": {
                "specVersion": "1.0",
                "entries": [{"identifier": "x", "mediaType": "application/a2a-agent-card+json"}],
            },
        }
        return httpx.Response(200, json=documents[request.url.path])

    async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as http:
        with pytest.raises(CatalogError, match=r"specVersion 2.0 is not supported \(1.x is\)"):
            await fetch_catalog(http, "https://c.example/v2.json")
        with pytest.raises(CatalogError, match="not an AI Catalog"):
            await fetch_catalog(http, "https://c.example/card.json")
        bad = await fetch_catalog(http, "https://c.example/bad.json")  # the entry skipped
    assert bad.agents == []
    assert bad.skipped == ("entries[0] ('x'): field displayName is required (a string)",)
