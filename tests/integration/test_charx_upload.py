"""A CHARX (a V3 card and its assets in a zip) uploaded through REST: the persona of its card,
its icon served as the avatar, its other assets kept and served beside it (the avatar's
access, their media type, gone with the persona); and a persona exported as one, with its
assets, which uploads as the same card (tests/personas/test_charx.py reads and writes the
format itself)."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from typing import Any

import pytest

from tests.integration.conftest import Hub, HubFactory
from tests.integration.test_card_images import mcp_config_file, size_of, upload
from tests.integration.test_memory import database
from tests.personas.cards import ORLA_V3, decoded_chunk
from tests.personas.test_charx import ICON, charx, picture

__all__ = ["mcp_config_file"]

API = "/api/v1/personas"


async def test_a_charx_uploads_with_its_avatar(hub: Hub) -> None:
    created = await upload(hub, "upload", "orla.charx", charx(), id="orla")
    assert created.status_code == 201, created.text
    avatar = await hub.http.get("/a2a/orla/avatar")
    assert avatar.status_code == 200
    assert size_of(avatar.content) == (60, 90)
    card = await hub.http.get("/api/v1/personas/orla/card")
    assert card.json()["data"]["name"] == ORLA_V3["data"]["name"]


async def test_a_persona_exported_as_a_charx_uploads_as_the_same_card(hub: Hub) -> None:
    created = await upload(hub, "upload", "orla.charx", charx(), id="orla")
    assert created.status_code == 201, created.text
    exported = await hub.http.get(f"{API}/orla/card", params={"as": "charx"})
    assert exported.status_code == 200, exported.text
    assert exported.headers["content-type"] == "application/zip"
    assert exported.headers["content-disposition"] == 'attachment; filename="orla.charx"'
    with zipfile.ZipFile(io.BytesIO(exported.content)) as archive:
        assert set(archive.namelist()) == {"card.json", ICON, "assets/bg.png"}
        assert archive.read(ICON) == (await hub.http.get("/a2a/orla/avatar")).content
        assert archive.read("assets/bg.png") == picture((0, 0, 200))  # as it came

    again = await upload(hub, "upload", "orla.charx", exported.content, id="orla-again")
    assert again.status_code == 201, again.text
    first = (await hub.http.get(f"{API}/orla/card")).json()
    second = (await hub.http.get(f"{API}/orla-again/card")).json()
    assert second == first | {"data": second["data"]}  # the same card, field for field:
    assert second["data"] == first["data"] | {"assets": second["data"]["assets"]}
    assert second["data"]["assets"] == [  # its icon where the CHARX has it, its background
        {"type": "icon", "uri": f"embeded://{ICON}", "name": "main", "ext": "png"},
        {"type": "background", "uri": "embeded://assets/bg.png", "name": "sky", "ext": "png"},
    ]
    served = await hub.http.get("/a2a/orla-again/assets/assets/bg.png")
    assert served.content == picture((0, 0, 200))
    avatar = await hub.http.get("/a2a/orla-again/avatar")
    assert avatar.content == (await hub.http.get("/a2a/orla/avatar")).content


async def test_a_charx_is_a_v3_card(hub: Hub) -> None:
    refused = await hub.http.get(f"{API}/socrates/card", params={"format": "v2", "as": "charx"})
    assert refused.status_code == 422
    [problem] = refused.json()["detail"]
    assert problem["loc"] == ["query", "as"]
    assert problem["msg"] == "a CHARX holds a V3 card: as=charx goes with format=v3 (the default)"


DECORATED = [
    "@@depth 4\nStorms come from the north-west.",
    "@@activate_only_after 3\n@@activate_only_every 2\n@@role assistant\nThe lamp is lit.",
    "@@position after_desc\n@@scan_depth 5\n@@instruct_depth 2\n@@reverse_depth 1\nTides.",
    "@@is_greeting 1\n@@dont_activate\n@@ignore_on_max_context\nSeals sing at dusk.",
    "@@additional_keys gull,tern\n@@exclude_keys crow\n@@@fallback\n@@activate\nBirds.",
    "@@is_user_persona\n\n  Indented text after a blank line.\n@@ not a decorator here",
]


async def test_v3_decorators_are_given_back_unchanged_in_every_export(hub: Hub) -> None:
    """The character card spec V3's lorebook decorators (``@@depth 4``, ``@@@fallback``,
    ...) at the top of an entry's content: imported from a CHARX, exported as a CHARX, a
    JSON card and a PNG card, each entry's content is as it was, byte for byte."""
    card = copy.deepcopy(ORLA_V3)
    card["data"]["character_book"]["entries"] = [
        {"keys": [f"key{n}"], "content": content, "enabled": True, "insertion_order": n}
        for n, content in enumerate(DECORATED)
    ]
    created = await upload(hub, "upload", "orla.charx", charx(card), id="orla")
    assert created.status_code == 201, created.text

    def contents(exported: dict[str, Any]) -> list[str]:
        return [e["content"] for e in exported["data"]["character_book"]["entries"]]

    as_json = await hub.http.get(f"{API}/orla/card")
    assert contents(as_json.json()) == DECORATED
    as_charx = await hub.http.get(f"{API}/orla/card", params={"as": "charx"})
    with zipfile.ZipFile(io.BytesIO(as_charx.content)) as archive:
        assert contents(json.loads(archive.read("card.json"))) == DECORATED
    as_png = await hub.http.get(f"{API}/orla/card", params={"as": "png"})
    assert as_png.status_code == 200, as_png.text
    assert contents(decoded_chunk(as_png.content, "ccv3")) == DECORATED
    # And again: the exported CHARX imports as the same entries.
    again = await upload(hub, "upload", "orla.charx", as_charx.content, id="orla-again")
    assert again.status_code == 201, again.text
    assert contents((await hub.http.get(f"{API}/orla-again/card")).json()) == DECORATED


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])  # the file store; replicas' SQL store
async def test_a_charxs_assets_are_served_as_the_avatar_is_and_go_with_the_persona(
    hub_factory: HubFactory, kind: str
) -> None:
    async with hub_factory(**await database(kind)) as hub:
        await _assets_served(hub)


async def _assets_served(hub: Hub) -> None:
    sound = b"ID3" + b"\x00" * 64
    page = b"<script>alert(1)</script>"
    card = copy.deepcopy(ORLA_V3)
    card["data"]["assets"] = [
        {"type": "icon", "uri": f"embeded://{ICON}", "name": "main", "ext": "png"},
        {"type": "background", "uri": "embeded://assets/bg.png", "name": "sky", "ext": "png"},
        {"type": "sound", "uri": "embeded://assets/other/sea.mp3", "name": "sea", "ext": "mp3"},
        {"type": "x-page", "uri": "embeded://assets/other/page.html", "name": "p", "ext": "html"},
        {"type": "emotion", "uri": "https://example.org/smile.png", "name": "smile", "ext": "png"},
    ]
    files = {
        ICON: picture((200, 40, 40)),
        "assets/bg.png": picture((0, 0, 200)),
        "assets/other/sea.mp3": sound,
        "assets/other/page.html": page,
    }
    created = await upload(hub, "upload", "orla.charx", charx(card, **files), id="orla")
    assert created.status_code == 201, created.text
    background = await hub.http.get("/a2a/orla/assets/assets/bg.png")
    assert (background.status_code, background.headers["content-type"]) == (200, "image/png")
    assert background.content == files["assets/bg.png"]
    assert background.headers["x-content-type-options"] == "nosniff"
    sea = await hub.http.get("/a2a/orla/assets/assets/other/sea.mp3")
    assert (sea.headers["content-type"], sea.content) == ("audio/mpeg", sound)
    html = await hub.http.get("/a2a/orla/assets/assets/other/page.html")
    assert html.headers["content-type"] == "application/octet-stream"  # never run as a page
    assert "sandbox" in html.headers["content-security-policy"]
    for missing in ("assets/none.png", ICON, "https://example.org/smile.png"):
        answer = await hub.http.get(f"/a2a/orla/assets/{missing}")
        assert answer.status_code == 404, missing
    assert (await hub.http.get("/a2a/socrates/assets/assets/bg.png")).status_code == 404

    # Uploaded again as a JSON card: the persona's assets are the new upload's (none).
    replaced = await upload(
        hub, "upload", "orla.json", json.dumps(card).encode(), id="orla", replace="true"
    )
    assert replaced.status_code in (200, 201), replaced.text
    assert (await hub.http.get("/a2a/orla/assets/assets/bg.png")).status_code == 404
    again = await upload(
        hub, "upload", "orla.charx", charx(card, **files), id="orla", replace="true"
    )
    assert again.status_code in (200, 201), again.text
    assert (await hub.http.get("/a2a/orla/assets/assets/bg.png")).status_code == 200
    deleted = await hub.http.delete(f"{API}/orla", headers={"X-Requested-With": "tests"})
    assert deleted.status_code == 204, deleted.text
    recreated = await upload(hub, "upload", "orla.json", json.dumps(card).encode(), id="orla")
    assert recreated.status_code == 201, recreated.text
    assert (await hub.http.get("/a2a/orla/assets/assets/bg.png")).status_code == 404


async def test_a_charx_whose_assets_are_over_their_bounds_is_refused(hub: Hub) -> None:
    card = copy.deepcopy(ORLA_V3)
    card["data"]["assets"] = [
        {"type": "background", "uri": "embeded://assets/missing.png", "name": "x", "ext": "png"}
    ]
    missing = await upload(hub, "upload", "orla.charx", charx(card), id="orla")
    assert missing.status_code == 422
    assert "assets/missing.png is not in the zip" in missing.text
    card["data"]["assets"] = [
        {"type": "emotion", "uri": f"embeded://assets/e{n}.png", "name": str(n), "ext": "png"}
        for n in range(65)
    ]
    files = {f"assets/e{n}.png": b"x" for n in range(65)}
    many = await upload(hub, "upload", "orla.charx", charx(card, **files), id="orla")
    assert many.status_code == 422
    assert "65 embedded assets, more than 64" in many.text


async def test_an_asset_is_read_as_the_avatar_is_on_a_hub_that_wants_a_key(
    hub_factory: HubFactory,
) -> None:
    key = "owner-key-0123456789abcdef"
    keys = json.dumps([{"name": "owner", "key": key}])
    async with hub_factory(api_keys=keys, a2a_access="authenticated") as hub:
        created = await hub.http.post(
            f"{API}/upload",
            params={"id": "orla"},
            headers={"Authorization": f"Bearer {key}"},
            files={"file": ("orla.charx", charx())},
        )
        assert created.status_code == 201, created.text
        # No key: the persona's calls are refused, its picture and its assets are read.
        assert (await hub.http.get("/a2a/orla/tasks")).status_code == 401
        assert (await hub.http.get("/a2a/orla/avatar")).status_code == 200
        asset = await hub.http.get("/a2a/orla/assets/assets/bg.png")
        assert (asset.status_code, asset.content) == (200, picture((0, 0, 200)))
