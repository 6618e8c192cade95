"""CHARX files (personas/formats/charx.py): a V3 card and its assets in a zip, read as the
card's persona with its icon as the avatar, and written back as one (the REST upload and
export: tests/integration/test_charx_upload.py); what is not a CHARX, or over its bounds,
is refused in words."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from typing import Any

import pytest
from PIL import Image

from persona_agent.errors import PersonaFileError
from persona_agent.personas.formats.charx import ICON_PATH, CharxError, card_charx
from persona_agent.personas.formats.tavern import persona_to_card
from persona_agent.personas.loader import read_persona
from persona_agent.security.limits import Limits
from tests.personas.cards import ORLA_V3

ICON = "assets/icon/images/main.png"


def size_of(raw: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(raw)) as image:
        return image.size


def picture(colour: tuple[int, int, int], size: tuple[int, int] = (60, 90)) -> bytes:
    output = io.BytesIO()
    Image.new("RGB", size, colour).save(output, "PNG")
    return output.getvalue()


def charx(card: dict[str, Any] | None = None, **files: bytes) -> bytes:
    """A CHARX: ``card`` (ORLA_V3 with its icon listed) as card.json, and ``files``."""
    if card is None:
        card = copy.deepcopy(ORLA_V3)
        card["data"]["assets"] = [
            {"type": "background", "uri": "embeded://assets/bg.png", "name": "sky", "ext": "png"},
            {"type": "icon", "uri": f"embeded://{ICON}", "name": "main", "ext": "png"},
        ]
        files = {ICON: picture((200, 40, 40)), "assets/bg.png": picture((0, 0, 200)), **files}
    output = io.BytesIO()
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("card.json", json.dumps(card))
        for name, data in files.items():
            archive.writestr(name, data)
    return output.getvalue()


def test_a_charx_is_its_card_with_its_icon_as_the_avatar() -> None:
    loaded = read_persona(None, charx(), source="orla.charx", fmt="charx")
    assert loaded.persona.name == ORLA_V3["data"]["name"]
    assert loaded.image is not None
    assert size_of(loaded.image.data) == (60, 90)
    with Image.open(io.BytesIO(loaded.image.data)) as image:
        assert image.convert("RGB").getpixel((0, 0)) == (200, 40, 40)  # the icon, not the sky
    assert loaded.source is not None
    assert loaded.source.fmt == "json"
    stored = json.loads(loaded.source.data)
    assert stored["data"]["assets"][1]["uri"] == f"embeded://{ICON}"  # kept as it was


def problem(raw: bytes, limits: Limits | None = None) -> str:
    with pytest.raises(PersonaFileError) as caught:
        read_persona(None, raw, source="x.charx", fmt="charx", limits=limits or Limits())
    return " ".join(caught.value.problems)


def test_what_is_not_a_charx_is_refused_in_words() -> None:
    assert "not a CHARX (a zip file)" in problem(b"PK not really")
    no_card = io.BytesIO()
    with zipfile.ZipFile(no_card, "w") as archive:
        archive.writestr("other.json", "{}")
    assert "no card.json at the zip's root" in problem(no_card.getvalue())
    missing = copy.deepcopy(ORLA_V3)
    missing["data"]["assets"] = [{"type": "icon", "uri": "embeded://gone.png", "name": "main"}]
    assert "the card's icon embeded://gone.png is not in the zip" in problem(charx(missing))
    assert "is not a character card" in problem(charx({"name": "not a card"}))
    # An entry is read through a bounded read, whatever the zip says of its size.
    big = copy.deepcopy(ORLA_V3)
    big["data"]["creator_notes"] = "x" * 50_000
    assert "the card (card.json) is larger than" in problem(charx(big), Limits(max_bytes=20_000))


def entries(raw: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_a_persona_exported_as_a_charx_imports_as_the_same_card() -> None:
    loaded = read_persona(None, charx(), source="orla.charx", fmt="charx")
    exported = card_charx(loaded.persona, loaded.image)
    files = entries(exported)
    assert set(files) == {"card.json", ICON_PATH}
    assert ICON_PATH == ICON  # where the spec puts an icon, as the cards we read have it
    card = json.loads(files["card.json"])
    assert card["spec"] == "chara_card_v3"
    # The icon is the zip's; the sky's file was not kept on import, so it is not listed.
    assert card["data"]["assets"] == [
        {"type": "icon", "uri": f"embeded://{ICON}", "name": "main", "ext": "png"}
    ]
    again = read_persona(None, exported, source="orla.charx", fmt="charx")
    assert persona_to_card(again.persona, "v3") == card  # every field of the card
    kept = {"extensions", "version"}  # the card kept: the sky's asset no longer listed
    assert again.persona.model_dump(exclude=kept) == loaded.persona.model_dump(exclude=kept)
    assert again.image is not None
    assert loaded.image is not None
    assert again.image.data == loaded.image.data  # the same pixels, the same PNG
    assert card_charx(again.persona, again.image) == exported  # one card, one CHARX


def test_a_persona_without_a_picture_is_a_charx_of_its_card_alone() -> None:
    loaded = read_persona(None, json.dumps(ORLA_V3).encode(), source="orla.json", fmt="json")
    exported = card_charx(loaded.persona, None)
    assert set(entries(exported)) == {"card.json"}
    again = read_persona(None, exported, source="orla.charx", fmt="charx")
    assert again.image is None
    assert persona_to_card(again.persona, "v3") == persona_to_card(loaded.persona, "v3")


def test_a_charxs_assets_are_read_within_their_bounds_and_written_back() -> None:
    from persona_agent.personas.formats.charx import read_charx, write_charx

    parts = read_charx(charx(), max_card_bytes=100_000, max_image_bytes=1_000_000)
    [background] = parts.assets
    assert (background.path, background.media_type) == ("assets/bg.png", "image/png")
    assert background.data == picture((0, 0, 200))
    written = write_charx(json.loads(parts.card), parts.icon, parts.assets)
    again = read_charx(written, max_card_bytes=100_000, max_image_bytes=1_000_000)
    assert again.assets == parts.assets
    assert again.icon == parts.icon

    with pytest.raises(CharxError, match="the assets together"):  # over their bytes together
        read_charx(charx(), max_card_bytes=100_000, max_image_bytes=1_000_000, max_assets_bytes=10)
    card = copy.deepcopy(ORLA_V3)
    card["data"]["assets"] = [
        {"type": "background", "uri": "embeded://assets/../../etc/passwd", "ext": "png"}
    ]
    with pytest.raises(CharxError, match="has no path this hub keeps"):
        read_charx(charx(card), max_card_bytes=100_000, max_image_bytes=1_000_000)
