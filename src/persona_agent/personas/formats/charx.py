"""CHARX files: a V3 character card as a zip, ``card.json`` at its root and the card's
assets beside it (character card spec V3, "CHARX").

The card's ``data.assets`` lists each asset by ``type`` (``icon``, ``background``,
``emotion``, ...), ``name`` and ``uri``; ``embeded://path`` (one ``d``, as the spec spells
it) names a file in the zip. The persona takes the card and its icon (the one named
``main``, else the first) as its avatar; the other assets stay listed in the card as they
were. The zip is untrusted input: entries are read through bounded reads (what an entry
says of its size is not trusted), at most ``max_entries`` are listed, and a path leaving
the archive is nobody's.

A persona is exported as a CHARX of its V3 card and its avatar, as the ``main`` icon at
:data:`ICON_PATH` (where the spec would have it: ``assets/{type}/images/``). The hub keeps
no asset but the icon, so the card's other ``embeded://`` assets, whose files were not kept
on import, are left out of the exported card; assets at a URL stay listed.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from dataclasses import dataclass
from typing import Any

from persona_agent.personas.formats.png import CleanImage
from persona_agent.personas.formats.tavern import persona_to_card
from persona_agent.personas.model import Persona

__all__ = [
    "CARD_ENTRY",
    "ICON_PATH",
    "CharxError",
    "CharxParts",
    "card_charx",
    "read_charx",
    "write_charx",
]

CARD_ENTRY = "card.json"
EMBEDDED = "embeded://"
ICON_PATH = "assets/icon/images/main.png"
"""Where an exported CHARX keeps the persona's avatar (always a PNG: the hub keeps it so)."""
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
"""Every entry's date: the zip's earliest, so that one card always gives the same bytes."""
MAX_ENTRIES = 10_000
"""Entries a CHARX may list: far above any card's assets; a zip of more is refused."""


class CharxError(Exception):
    """Not a CHARX this hub reads: what is wrong, in words."""


@dataclass(frozen=True, slots=True)
class CharxParts:
    """What a CHARX holds for a persona: its card's JSON bytes, and its icon's bytes."""

    card: bytes
    icon: bytes | None


def _read(archive: zipfile.ZipFile, name: str, limit: int, what: str) -> bytes:
    try:
        with archive.open(name) as entry:
            data = entry.read(limit + 1)
    except (KeyError, zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError) as error:
        raise CharxError(f"{what} ({name}) cannot be read: {error}") from None
    if len(data) > limit:
        raise CharxError(f"{what} ({name}) is larger than {limit:,} bytes")
    return data


def _icon_path(card: Any) -> str | None:
    """The zip path of the card's icon (the one named ``main``, else the first), if embedded."""
    data = card.get("data") if isinstance(card, dict) else None
    assets = data.get("assets") if isinstance(data, dict) else None
    if not isinstance(assets, list):
        return None
    icons = [a for a in assets if isinstance(a, dict) and a.get("type") == "icon"]
    icons.sort(key=lambda asset: asset.get("name") != "main")
    for icon in icons:
        uri = icon.get("uri")
        if isinstance(uri, str) and uri.startswith(EMBEDDED):
            return uri.removeprefix(EMBEDDED).lstrip("/")
    return None


def read_charx(
    raw: bytes, *, max_card_bytes: int, max_image_bytes: int, max_entries: int = MAX_ENTRIES
) -> CharxParts:
    """The card and the icon of a CHARX file's bytes.

    Raises:
        CharxError: not a zip, no ``card.json``, too many entries, an entry over its
            bound, a card that is not JSON, or an icon the card names that is not there.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except (zipfile.BadZipFile, OSError) as error:
        raise CharxError(f"not a CHARX (a zip file): {error}") from None
    with archive:
        names = archive.namelist()
        if len(names) > max_entries:
            raise CharxError(f"the zip lists {len(names):,} entries, more than {max_entries:,}")
        if CARD_ENTRY not in names:
            raise CharxError(f"no {CARD_ENTRY} at the zip's root: not a CHARX")
        card = _read(archive, CARD_ENTRY, max_card_bytes, "the card")
        try:
            parsed = json.loads(card)
        except (ValueError, RecursionError) as error:
            raise CharxError(f"{CARD_ENTRY} is not JSON: {error}") from None
        path = _icon_path(parsed)
        if path is None:
            return CharxParts(card, None)
        if path not in names:
            raise CharxError(f"the card's icon {EMBEDDED}{path} is not in the zip")
        return CharxParts(card, _read(archive, path, max_image_bytes, "the icon"))


def card_charx(persona: Persona, image: CleanImage | None) -> bytes:
    """The persona as a CHARX: its V3 card, and its avatar (``None``: it has none) as the
    card's ``main`` icon."""
    return write_charx(persona_to_card(persona, "v3"), image.data if image else None)


def write_charx(card: dict[str, Any], icon: bytes | None) -> bytes:
    """A CHARX of ``card`` (a V3 card's JSON data) and its ``icon`` (PNG bytes), which
    replaces any ``main`` icon the card lists; the card's other embedded assets are left
    out (their files are not here)."""
    card = copy.deepcopy(card)
    data = card.get("data")
    if isinstance(data, dict):
        _point_assets(data, icon is not None)
    entries = [(CARD_ENTRY, json.dumps(card, ensure_ascii=False).encode(), zipfile.ZIP_DEFLATED)]
    if icon is not None:
        entries.append((ICON_PATH, icon, zipfile.ZIP_STORED))  # a PNG is compressed already
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content, compression in entries:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = compression
            archive.writestr(info, content)
    return buffer.getvalue()


def _point_assets(data: dict[str, Any], has_icon: bool) -> None:
    """``data.assets`` as the zip has them: no embedded asset but the icon written."""
    assets = data.get("assets")
    if not isinstance(assets, list):
        if not has_icon:
            return
        assets = []
    kept = [
        asset
        for asset in assets
        if not (isinstance(asset, dict) and str(asset.get("uri", "")).startswith(EMBEDDED))
        and not (has_icon and _is_main_icon(asset))
    ]
    if has_icon:
        icon = {"type": "icon", "uri": EMBEDDED + ICON_PATH, "name": "main", "ext": "png"}
        kept.insert(0, icon)
    data["assets"] = kept


def _is_main_icon(asset: Any) -> bool:
    return isinstance(asset, dict) and asset.get("type") == "icon" and asset.get("name") == "main"
