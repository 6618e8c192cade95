"""A CHARX (a V3 card and its assets in a zip) uploaded through REST: the persona of its card,
its icon served as the avatar; and a persona exported as one, which uploads as the same card
(tests/personas/test_charx.py reads and writes the format itself)."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from typing import Any

from tests.integration.conftest import Hub
from tests.integration.test_card_images import mcp_config_file, size_of, upload
from tests.personas.cards import ORLA_V3, decoded_chunk
from tests.personas.test_charx import ICON, charx

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
        assert set(archive.namelist()) == {"card.json", ICON}
        assert archive.read(ICON) == (await hub.http.get("/a2a/orla/avatar")).content

    again = await upload(hub, "upload", "orla.charx", exported.content, id="orla-again")
    assert again.status_code == 201, again.text
    first = (await hub.http.get(f"{API}/orla/card")).json()
    second = (await hub.http.get(f"{API}/orla-again/card")).json()
    assert second == first | {"data": second["data"]}  # the same card, field for field:
    assert second["data"] == first["data"] | {"assets": second["data"]["assets"]}
    assert second["data"]["assets"] == [  # its icon where the CHARX has it
        {"type": "icon", "uri": f"embeded://{ICON}", "name": "main", "ext": "png"}
    ]
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
