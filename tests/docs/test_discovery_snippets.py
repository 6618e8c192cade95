"""docs/discovery.md against one running hub that signs its cards: the ``curl`` lines run in
the docs sandbox, the catalog they print has the shape the doc shows, the ``Link`` line is
what the card's headers say, the verifying program prints each agent with the signature
verified, and the agents file's ``catalogs:`` loads as the doc says. The ``chat --agent
CATALOG#name`` line is run by tests/cli/test_chat.py (not_run.RUN_ELSEWHERE)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives.asymmetric import ec

from persona_agent.collab.agents_file import parse_agents_config
from tests.docs.sandbox import DOC_URL, Ran, Sandbox, rewrite
from tests.docs.snippets import claim, expect
from tests.integration.conftest import HubFactory
from tests.integration.test_card_signing import pem

DOC = "docs/discovery.md"
CURL = claim(DOC, "curl -s http://127.0.0.1:8000/.well-known/ai-catalog.json")
SHAPE = claim(DOC, '"specVersion": "1.0"')
CURL_LINK = claim(DOC, "curl -s -o /dev/null -D -")
LINK = claim(DOC, 'link: </.well-known/ai-catalog.json>; rel="ai-catalog"')
VERIFY = claim(DOC, "from persona_agent.a2a.discovery.catalog_reader import fetch_catalog")
AGENTS_FILE = claim(DOC, "exclude: [marie-curie]")


async def run(sandbox: Sandbox, command: str) -> Ran:
    return await asyncio.to_thread(sandbox.run, command)


def keys(value: Any) -> set[str]:
    return set(value) if isinstance(value, dict) else set()


async def test_the_catalog_its_link_and_its_signature_as_the_doc_shows(
    sandbox: Sandbox, hub_factory: HubFactory, tmp_path: Path
) -> None:
    key = pem(ec.generate_private_key(ec.SECP256R1()), tmp_path / "card.pem")
    async with hub_factory(card_signing_key=key, mcp_config=None) as hub:
        base = hub.settings.base_url
        (curl,) = expect(CURL, "curl -s ")
        catalog = (await run(sandbox, rewrite(curl, {DOC_URL: base}))).ok().json()
        (headers,) = expect(CURL_LINK, "curl -s -o /dev/null -D - ")
        printed = (await run(sandbox, rewrite(headers, {DOC_URL: base}))).ok().stdout
        program = rewrite(VERIFY.text, {DOC_URL: base})
        (sandbox.root / "verify.py").write_text(program, encoding="utf-8")
        verified = (await run(sandbox, "python verify.py")).ok().stdout

    shown = json.loads(rewrite(SHAPE.text, {DOC_URL: base}).replace("...", ""))
    assert catalog["specVersion"] == shown["specVersion"]
    assert {k: catalog["host"][k] for k in shown["host"]} == shown["host"]
    first, socrates = shown["entries"]
    hub_entry = catalog["entries"][0]
    real = {entry["identifier"]: entry for entry in catalog["entries"]}
    for doc_entry, entry in ((first, hub_entry), (socrates, real[socrates["identifier"]])):
        assert keys(doc_entry) <= keys(entry) <= keys(doc_entry) | {"trustManifest"}
        for field in ("identifier", "displayName", "mediaType", "type", "tags"):
            assert entry[field] == doc_entry[field], field
        assert entry["data"]["name"] == doc_entry["data"]["name"]
    assert "trustManifest" in catalog["host"]  # signed, as the hub's cards are

    assert LINK.text.strip() in [line.strip() for line in printed.lower().splitlines()]
    lines = verified.splitlines()
    assert lines[0] == "signature verified: True"
    assert f"socrates {base}/a2a/socrates/.well-known/agent-card.json" in lines


def test_the_agents_files_catalogs_load_as_the_doc_says() -> None:
    config = parse_agents_config(yaml.safe_load(AGENTS_FILE.text), {}, source=DOC)
    (lab,) = config.catalogs.values()
    assert lab.prefix == "lab"
    assert lab.exclude == ["marie-curie"]
    assert lab.signed is True
    assert lab.url == "http://127.0.0.1:8001/.well-known/ai-catalog.json"
