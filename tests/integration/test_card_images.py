"""Card images through the REST doors: decoded no larger than needed, avatars scaled down on
import, exported PNG cards encoded once per persona version."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import httpx
import pytest
from PIL import Image

from persona_agent.api.app import HubApp
from tests.integration.conftest import Hub
from tests.personas.cards import ORLA_V3, card_png, decoded_chunk

API = "/api/v1/personas"
UPLOAD = {"X-Requested-With": "tests"}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def upload(hub: Hub, path: str, name: str, content: bytes, **params: Any) -> httpx.Response:
    return await hub.http.post(
        f"{API}/{path}", headers=UPLOAD, params=params, files={"file": (name, content)}
    )


def size_of(raw: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(raw)) as image:
        return image.size


async def test_a_big_picture_becomes_an_avatar_of_at_most_1024_pixels(hub: Hub) -> None:
    raw = card_png(ORLA_V3, Image.new("RGB", (2048, 3072), (90, 60, 30)))
    created = await upload(hub, "upload", "orla.png", raw, id="orla")
    assert created.status_code == 201, created.text
    avatar = await hub.http.get("/a2a/orla/avatar")
    assert size_of(avatar.content) == (683, 1024)
    exported = await hub.http.get(f"{API}/orla/card", params={"as": "png"})
    assert size_of(exported.content) == (683, 1024)
    assert decoded_chunk(exported.content, "ccv3") == ORLA_V3


async def test_a_picture_of_too_many_pixels_is_refused_from_its_header(hub: Hub) -> None:
    # 25 million pixels in a small file: decoding it took 100 MB (1.3 GB at 6300 x 6300).
    raw = card_png(ORLA_V3, Image.new("L", (5000, 5000)))
    assert len(raw) < 100_000
    checked = await upload(hub, "validate", "huge.png", raw)
    assert checked.json() == {
        "valid": False,
        "problems": ["huge.png: the image is 5000 × 5000 pixels, more than 16,777,216 in all"],
    }


async def test_an_exported_png_card_is_encoded_once_per_version(hub: Hub) -> None:
    raw = card_png(ORLA_V3, Image.new("RGB", (900, 900), (1, 2, 3)))
    assert (await upload(hub, "upload", "orla.png", raw, id="orla")).status_code == 201
    assert isinstance(hub.app, HubApp)
    cards = hub.app.parts.card_pngs
    before = cards.encoded
    params = {"format": "v3", "as": "png"}
    first, second, third = await asyncio.gather(
        *(hub.http.get(f"{API}/orla/card", params=params) for _ in range(3))
    )
    assert first.content == second.content == third.content
    assert cards.encoded == before + 1  # three callers at once: one encoding
    again = await hub.http.get(f"{API}/orla/card", params=params)
    assert again.content == first.content
    assert cards.encoded == before + 1
    assert 0 < cards.size <= hub.settings.card_png_cache_bytes

    v2 = await hub.http.get(f"{API}/orla/card", params={"format": "v2", "as": "png"})
    assert decoded_chunk(v2.content, "chara")["spec"] == "chara_card_v2"
    assert cards.encoded == before + 2
    persona = (await hub.http.get(f"{API}/orla")).json()
    changed = await hub.http.put(f"{API}/orla", json={**persona, "scenario": "A new one."})
    assert changed.status_code == 200, changed.text
    newer = await hub.http.get(f"{API}/orla/card", params=params)
    assert decoded_chunk(newer.content, "ccv3")["data"]["scenario"] == "A new one."
    assert cards.encoded == before + 3
