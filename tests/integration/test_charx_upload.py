"""A CHARX (a V3 card and its assets in a zip) uploaded through REST: the persona of its card,
its icon served as the avatar; and a persona exported as one, which uploads as the same card
(tests/personas/test_charx.py reads and writes the format itself)."""

from __future__ import annotations

import io
import zipfile

from tests.integration.conftest import Hub
from tests.integration.test_card_images import mcp_config_file, size_of, upload
from tests.personas.cards import ORLA_V3
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
