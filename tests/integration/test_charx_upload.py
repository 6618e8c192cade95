"""A CHARX (a V3 card and its assets in a zip) uploaded through REST: the persona of its card,
its icon served as the avatar (tests/personas/test_charx.py reads the format itself)."""

from __future__ import annotations

from tests.integration.conftest import Hub
from tests.integration.test_card_images import mcp_config_file, size_of, upload
from tests.personas.cards import ORLA_V3
from tests.personas.test_charx import charx

__all__ = ["mcp_config_file"]


async def test_a_charx_uploads_with_its_avatar(hub: Hub) -> None:
    created = await upload(hub, "upload", "orla.charx", charx(), id="orla")
    assert created.status_code == 201, created.text
    avatar = await hub.http.get("/a2a/orla/avatar")
    assert avatar.status_code == 200
    assert size_of(avatar.content) == (60, 90)
    card = await hub.http.get("/api/v1/personas/orla/card")
    assert card.json()["data"]["name"] == ORLA_V3["data"]["name"]
