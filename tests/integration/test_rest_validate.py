"""What the console's editor asks of the REST API: a persona's file (GET .../{id}/file) and a
file checked without being saved (POST .../validate), through a real hub."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import yaml

from tests.integration.conftest import HERMIT, Hub, HubFactory
from tests.personas.cards import MIRA_V2, ORLA_V3, card_png, picture

API = "/api/v1/personas"


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def validate(
    http: httpx.AsyncClient, name: str, content: bytes, **params: str
) -> httpx.Response:
    """A file checked as the console's editor asks (its upload header: a keyless hub takes
    a file to check as it takes an upload)."""
    return await http.post(
        f"{API}/validate",
        params=params,
        files={"file": (name, content)},
        headers={"X-Requested-With": "test"},
    )


async def test_a_valid_file_is_checked_and_nothing_is_saved(hub: Hub) -> None:
    # Without keys, a web page's form may not make the hub read a file for it (it costs
    # what an upload costs): it needs the upload's header or the hub's own Origin.
    form = await hub.http.post(
        f"{API}/validate", files={"file": ("newton.yaml", yaml.safe_dump(HERMIT).encode())}
    )
    assert form.status_code == 403
    assert "X-Requested-With" in form.json()["detail"]
    response = await validate(hub.http, "newton.yaml", yaml.safe_dump(HERMIT).encode())
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    assert body["valid"] is True
    assert body["problems"] == []
    assert body["id"] == "newton"
    assert body["exists"] is False
    assert body["persona"] == {"id": "newton", **HERMIT}
    assert (await hub.http.get(f"{API}/newton")).status_code == 404

    # The persona it gives is a body to create with, or to replace with.
    created = await hub.http.post(API, json=body["persona"])
    assert created.status_code == 201, created.text
    again = (await validate(hub.http, "newton.yaml", yaml.safe_dump(HERMIT).encode())).json()
    assert again["exists"] is True
    replaced = await hub.http.put(
        f"{API}/newton",
        json={**again["persona"], "name": "Hal again"},
        headers={"If-Match": created.headers["etag"]},
    )
    assert replaced.status_code == 200, replaced.text


async def test_problems_are_named_as_for_an_upload(hub: Hub) -> None:
    broken = b"name: [Hal\ndescription: x\n"
    body = (await validate(hub.http, "hal.yaml", broken)).json()
    assert body == {
        "valid": False,
        "problems": [
            "hal.yaml: YAML syntax error at line 2, column 12: did not find expected ',' or "
            "']' (while parsing a flow sequence)"
        ],
    }
    wrong = {**HERMIT, "mood": "grumpy"}
    del wrong["description"]
    body = (await validate(hub.http, "hal.yaml", yaml.safe_dump(wrong).encode())).json()
    assert body["valid"] is False
    assert sorted(body["problems"]) == [
        "hal.yaml: description: Field required",
        "hal.yaml: mood: unknown field",
    ]
    # The same words as the upload's 422.
    upload = await hub.http.post(
        f"{API}/upload",
        headers={"X-Requested-With": "tests"},
        files={"file": ("hal.yaml", yaml.safe_dump(wrong).encode())},
    )
    assert upload.status_code == 422
    assert sorted(item["msg"] for item in upload.json()["detail"]) == sorted(body["problems"])

    bad_id = await validate(hub.http, "x.yaml", yaml.safe_dump(HERMIT).encode(), id="No Id")
    assert bad_id.json()["valid"] is False
    assert "'No Id' is not a valid persona id" in bad_id.json()["problems"][0]
    suffix = (await validate(hub.http, "hal.txt", b"name: Hal")).json()
    assert suffix["valid"] is False
    assert suffix["problems"] == [
        "file name 'hal.txt' must end with .yaml, .yml, .json, .png, .charx"
    ]
    assert [p["id"] for p in (await hub.http.get("/a2a/personas")).json()].count("hal") == 0


async def test_character_cards_are_checked_too(hub: Hub) -> None:
    png = (await validate(hub.http, "orla.png", card_png(ORLA_V3, picture()))).json()
    assert png["valid"] is True
    assert png["id"] == "orla-of-the-lighthouse"
    assert png["persona"]["name"] == "Orla of the Lighthouse"
    json_card = (await validate(hub.http, "mira.json", json.dumps(MIRA_V2).encode())).json()
    assert json_card["valid"] is True
    assert json_card["persona"]["name"] == "Captain Mira Voss"
    assert (await hub.http.get(f"{API}/orla-of-the-lighthouse")).status_code == 404


async def test_the_persona_file_loads_back_as_the_same_persona(hub: Hub) -> None:
    persona = await hub.http.get(f"{API}/socrates")
    file = await hub.http.get(f"{API}/socrates/file")
    assert file.status_code == 200
    assert file.headers["content-type"].startswith("application/yaml")
    assert file.headers["etag"] == persona.headers["etag"]
    data = yaml.safe_load(file.text)
    assert "id" not in data
    assert "version" not in data
    # What an editor saves, unchanged, is the same persona: the same version.
    checked = (await validate(hub.http, "socrates.yaml", file.content)).json()
    saved = await hub.http.put(
        f"{API}/socrates", json=checked["persona"], headers={"If-Match": file.headers["etag"]}
    )
    assert saved.status_code == 200
    assert saved.headers["etag"] == persona.headers["etag"]
    assert (await hub.http.get(f"{API}/nobody/file")).status_code == 404


async def test_with_api_keys_both_need_a_reader(hub_factory: HubFactory) -> None:
    async with hub_factory(api_keys="reader-key") as hub:
        content = yaml.safe_dump(HERMIT).encode()
        assert (await validate(hub.http, "hal.yaml", content)).status_code == 401
        assert (await hub.http.get(f"{API}/socrates/file")).status_code == 401
        with_key = {"Authorization": "Bearer reader-key"}
        checked = await hub.http.post(
            f"{API}/validate", headers=with_key, files={"file": ("hal.yaml", content)}
        )
        assert checked.json()["valid"] is True
        file = await hub.http.get(f"{API}/socrates/file", headers=with_key)
        assert file.status_code == 200
