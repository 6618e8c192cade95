"""A persona's CHARX assets in the hub's database, on SQLite and PostgreSQL: replaced whole
by an import, read back by path in order, one by one, and deleted with the persona; a
CHARX that names a path twice keeps nothing (the database's own error)."""

from __future__ import annotations

import pytest

from persona_agent.db import GroupCommitWriter, IntegrityError
from persona_agent.personas.formats.charx import CharxAsset
from persona_agent.personas.stores.asset_store import PersonaAssets

SKY = CharxAsset("assets/sky.png", "image/png", b"\x89PNG sky")
SEA = CharxAsset("assets/other/sea.mp3", "audio/mpeg", b"ID3\x00\xff sea")
BELL = CharxAsset("assets/bell.ogg", "audio/ogg", bytes(range(256)))


async def test_assets_are_replaced_read_back_by_path_and_forgotten(
    writer: GroupCommitWriter,
) -> None:
    assets = PersonaAssets(writer)
    await assets.replace("orla", [SKY, SEA])
    await assets.replace("hermit", [BELL])
    assert await assets.of("orla") == [SEA, SKY]  # by path
    assert await assets.get("orla", SEA.path) == SEA
    assert await assets.get("orla", BELL.path) is None  # the hermit's
    assert await assets.get("nobody", SKY.path) is None

    await assets.replace("orla", [BELL, SKY])  # another import: its assets only
    assert await assets.of("orla") == [BELL, SKY]
    await assets.replace("orla", [])  # a card that is not a CHARX: none
    assert await assets.of("orla") == []

    await assets.forget_persona("hermit")
    assert await assets.of("hermit") == []
    assert await assets.of("nobody") == []


async def test_a_path_named_twice_keeps_nothing(writer: GroupCommitWriter) -> None:
    assets = PersonaAssets(writer)
    await assets.replace("orla", [SKY])
    with pytest.raises(IntegrityError):
        await assets.replace("orla", [SEA, SEA])
    assert await assets.of("orla") == [SKY]  # the transaction's delete went back too
