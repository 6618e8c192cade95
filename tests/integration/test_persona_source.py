"""A persona's file as written, through a real hub: read and saved byte for byte (PUT
.../file), refused whole when invalid or stale; uploads stored as they came; and the
read-only examples beside the user persona directory new personas go to."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx
import yaml

from tests.integration.conftest import HERMIT, Hub, HubFactory
from tests.personas.cards import MIRA_V2, ORLA_V3, card_png, picture

API = "/api/v1/personas"

COMMENTED = b"""# Hal, as his author keeps him.
name: Hal the Hermit   # the name people see
description: A test persona with no tools at all.
personal_background: Hal keeps to himself.

language_style: {tone: terse}
knowledge_domains:
  Solitude: [silence]   # one topic is enough
tools:
  allow: []
"""


async def put_file(
    http: httpx.AsyncClient, persona_id: str, content: bytes, media: str, **headers: str
) -> httpx.Response:
    return await http.put(
        f"{API}/{persona_id}/file", content=content, headers={"Content-Type": media, **headers}
    )


async def upload(http: httpx.AsyncClient, name: str, content: bytes) -> httpx.Response:
    return await http.post(
        f"{API}/upload", files={"file": (name, content)}, headers={"X-Requested-With": "test"}
    )


async def test_a_file_is_saved_and_read_back_byte_for_byte(hub: Hub) -> None:
    before = await hub.http.get(f"{API}/hermit/file")
    edited = COMMENTED.replace(b"with no tools at all.", b"who writes letters.")
    saved = await put_file(
        hub.http, "hermit", edited, "application/yaml", **{"If-Match": before.headers["etag"]}
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["description"] == "A test persona who writes letters."
    assert (hub.settings.personas_dir / "hermit.yaml").read_bytes() == edited
    again = await hub.http.get(f"{API}/hermit/file")
    assert again.content == edited  # comments, spacing and flow style as written
    assert again.headers["content-type"].startswith("application/yaml")
    assert again.headers["etag"] == saved.headers["etag"] != before.headers["etag"]
    card = (await hub.http.get("/a2a/hermit/.well-known/agent-card.json")).json()
    assert card["description"] == "A test persona who writes letters."


async def test_an_invalid_or_stale_file_changes_nothing(hub: Hub) -> None:
    path = hub.settings.personas_dir / "hermit.yaml"
    kept = path.read_bytes()
    current = (await hub.http.get(f"{API}/hermit/file")).headers["etag"]
    bad = COMMENTED.replace(b"language_style: {tone: terse}\n", b"language_style: 7\n")
    refused = await put_file(hub.http, "hermit", bad, "application/yaml")
    assert refused.status_code == 422
    messages = [item["msg"] for item in refused.json()["detail"]]
    assert any(m.startswith("hermit.yaml: language_style") for m in messages), messages
    broken = await put_file(hub.http, "hermit", b"name: [unclosed\n", "application/yaml")
    assert broken.status_code == 422
    assert "hermit.yaml: YAML syntax error at line" in broken.json()["detail"][0]["msg"]
    stale = await put_file(hub.http, "hermit", COMMENTED, "application/yaml", **{"If-Match": '"0"'})
    assert stale.status_code == 412
    unlabelled = await put_file(hub.http, "hermit", COMMENTED, "text/plain")
    assert unlabelled.status_code == 415
    missing = await put_file(hub.http, "nobody", COMMENTED, "application/yaml")
    assert missing.status_code == 404
    assert path.read_bytes() == kept
    assert (await hub.http.get(f"{API}/hermit")).headers["etag"] == current


async def test_uploads_are_stored_as_they_came(hub: Hub) -> None:
    directory = hub.settings.personas_dir
    yaml_file = b"# Grace, commented\n" + yaml.safe_dump({**HERMIT, "name": "Grace"}).encode()
    assert (await upload(hub.http, "grace.yml", yaml_file)).status_code == 201
    assert (directory / "grace.yaml").read_bytes() == yaml_file
    card_text = json.dumps(MIRA_V2, indent=4).encode()  # its own layout, kept
    mira = await upload(hub.http, "mira.json", card_text)
    assert mira.status_code == 201, mira.text
    assert (directory / "captain-mira-voss.json").read_bytes() == card_text
    file = await hub.http.get(f"{API}/captain-mira-voss/file")
    assert file.headers["content-type"].startswith("application/json")
    assert file.content == card_text
    # A card's field edited in its JSON: only that value of the text changes.
    edited = card_text.replace(b'"Captain Mira Voss"', b'"Admiral Mira Voss"')
    saved = await put_file(hub.http, "captain-mira-voss", edited, "application/json")
    assert saved.status_code == 200, saved.text
    assert saved.json()["name"] == "Admiral Mira Voss"
    assert (directory / "captain-mira-voss.json").read_bytes() == edited
    # A PNG card: its card JSON and its picture, as the REST API and the CLI store one.
    png = await upload(hub.http, "orla.png", card_png(ORLA_V3, picture((30, 20))))
    assert png.status_code == 201, png.text
    orla = png.json()["id"]
    assert json.loads((directory / f"{orla}.json").read_bytes()) == ORLA_V3
    assert (directory / f"{orla}.avatar.png").is_file()
    assert (await hub.http.get(f"/a2a/{orla}/avatar")).status_code == 200


async def test_examples_are_read_only_and_new_personas_go_to_the_user_folder(
    hub_factory: HubFactory, personas_dir: Path, tmp_path: Path
) -> None:
    user = tmp_path / "user-personas"
    examples = sorted(await asyncio.to_thread(os.listdir, personas_dir))
    socrates = await asyncio.to_thread((personas_dir / "socrates.yaml").read_bytes)
    async with hub_factory(user_personas_dir=user) as hub:
        listed = (await hub.http.get(API, params={"limit": 500})).json()
        assert {"socrates", "hermit"} <= {p["id"] for p in listed["items"]}
        # Created, uploaded and edited personas are written to the user folder only.
        created = await hub.http.post(API, json={"id": "newton", **HERMIT, "name": "Newton"})
        assert created.status_code == 201
        assert (await upload(hub.http, "grace.yaml", yaml.safe_dump(HERMIT).encode())).is_success
        edited = socrates.replace(b"Socrates", b"Sokrates", 1)
        assert (await put_file(hub.http, "socrates", edited, "application/yaml")).is_success
        assert (user / "socrates.yaml").read_bytes() == edited
        assert sorted(p.name for p in user.iterdir()) == [
            "grace.yaml",
            "newton.yaml",
            "socrates.yaml",
        ]
        # An example cannot be deleted; its edited copy can, and the example is back.
        refused = await hub.http.delete(f"{API}/hermit")
        assert refused.status_code == 409
        assert "read-only example" in refused.json()["detail"]
        assert (await hub.http.delete(f"{API}/socrates")).status_code == 204
        back = await hub.http.get(f"{API}/socrates/file")
        assert back.content == socrates
        assert (await hub.http.delete(f"{API}/newton")).status_code == 204
        assert (await hub.http.get(f"{API}/newton")).status_code == 404
    assert sorted(await asyncio.to_thread(os.listdir, personas_dir)) == examples
    assert await asyncio.to_thread((personas_dir / "socrates.yaml").read_bytes) == socrates
