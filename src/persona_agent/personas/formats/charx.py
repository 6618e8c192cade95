"""CHARX files: a V3 character card as a zip, ``card.json`` at its root and the card's
assets beside it (character card spec V3, "CHARX").

The card's ``data.assets`` lists each asset by ``type`` (``icon``, ``background``,
``emotion``, ...), ``name`` and ``uri``; ``embeded://path`` (one ``d``, as the spec spells
it) names a file in the zip. The persona takes the card and its icon (the one named
``main``, else the first) as its avatar; the card's other embedded assets are read too
(:class:`CharxAsset`: kept and served by the hub, written back on export), at most
:data:`MAX_ASSETS` of them and ``max_assets_bytes`` together. The zip is untrusted input:
entries are read through bounded reads (what an entry says of its size is not trusted), at
most ``max_entries`` are listed, and a path leaving the archive is nobody's.

A persona is exported as a CHARX of its V3 card, its avatar as the ``main`` icon at
:data:`ICON_PATH` (where the spec would have it: ``assets/{type}/images/``), and the assets
kept from its import at their paths. An ``embeded://`` asset whose file the hub does not
have is left out of the exported card; assets at a URL stay listed.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from persona_agent.personas.formats.png import CleanImage
from persona_agent.personas.formats.tavern import persona_to_card
from persona_agent.personas.model import Persona

__all__ = [
    "CARD_ENTRY",
    "ICON_PATH",
    "MAX_ASSETS",
    "CharxAsset",
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
MAX_ASSETS = 64
"""Embedded assets a CHARX may bring besides its icon: a card's backgrounds, expressions
and sounds; one of more is refused."""
MAX_ASSET_PATH = 300
"""Characters of an asset's path in the zip, at most."""


class CharxError(Exception):
    """Not a CHARX this hub reads: what is wrong, in words."""


@dataclass(frozen=True, slots=True)
class CharxAsset:
    """An embedded asset of a CHARX besides the icon: its path in the zip (as its
    ``embeded://`` URI names it), its media type (from its ``ext``), its bytes."""

    path: str
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True)
class CharxParts:
    """What a CHARX holds for a persona: its card's JSON bytes, its icon's bytes, and its
    other embedded assets."""

    card: bytes
    icon: bytes | None
    assets: tuple[CharxAsset, ...] = ()


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
    raw: bytes,
    *,
    max_card_bytes: int,
    max_image_bytes: int,
    max_entries: int = MAX_ENTRIES,
    max_assets_bytes: int | None = None,
) -> CharxParts:
    """The card, the icon and the other embedded assets of a CHARX file's bytes (the
    assets: ``max_assets_bytes`` together at most, by default ``max_image_bytes``).

    Raises:
        CharxError: not a zip, no ``card.json``, too many entries or assets, an entry over
            its bound, a card that is not JSON, or an icon or an asset the card names that
            is not there.
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
        icon = None
        if path is not None:
            if path not in names:
                raise CharxError(f"the card's icon {EMBEDDED}{path} is not in the zip")
            icon = _read(archive, path, max_image_bytes, "the icon")
        budget = max_image_bytes if max_assets_bytes is None else max_assets_bytes
        assets = _assets(archive, parsed, set(names), path, budget)
        return CharxParts(card, icon, assets)


def _assets(
    archive: zipfile.ZipFile, card: Any, names: set[str], icon: str | None, budget: int
) -> tuple[CharxAsset, ...]:
    """The card's embedded assets but its icon, read within ``budget`` bytes together."""
    wanted: dict[str, str] = {}
    for asset in _listed(card):
        path = _embedded_path(asset)
        if path is None or path == icon or path in wanted:
            continue
        if len(path) > MAX_ASSET_PATH or ".." in path.split("/"):
            raise CharxError(f"the asset {EMBEDDED}{path[:80]} has no path this hub keeps")
        if path not in names:
            raise CharxError(f"the card's asset {EMBEDDED}{path} is not in the zip")
        wanted[path] = media_type_of(asset, path)
    if len(wanted) > MAX_ASSETS:
        raise CharxError(f"the card lists {len(wanted)} embedded assets, more than {MAX_ASSETS}")
    read: list[CharxAsset] = []
    for path, media_type in wanted.items():
        data = _read(archive, path, budget, "the assets together")
        budget -= len(data)
        read.append(CharxAsset(path, media_type, data))
    return tuple(read)


def _listed(card: Any) -> list[dict[str, Any]]:
    data = card.get("data") if isinstance(card, dict) else None
    assets = data.get("assets") if isinstance(data, dict) else None
    return [a for a in assets if isinstance(a, dict)] if isinstance(assets, list) else []


def _embedded_path(asset: dict[str, Any]) -> str | None:
    uri = asset.get("uri")
    if isinstance(uri, str) and uri.startswith(EMBEDDED):
        return uri.removeprefix(EMBEDDED).lstrip("/")
    return None


_MEDIA_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
    "gif": "image/gif",
    "avif": "image/avif",
    "mp3": "audio/mpeg",
    "ogg": "audio/ogg",
    "wav": "audio/wav",
    "mp4": "video/mp4",
    "webm": "video/webm",
}
"""The media types an asset is served as, by its extension; any other is bytes
(``application/octet-stream``), never a type a browser would run (HTML, SVG, script)."""


def media_type_of(asset: dict[str, Any], path: str) -> str:
    """The media type an asset is served as: from its ``ext``, else its path's suffix."""
    ext = asset.get("ext")
    suffix = ext if isinstance(ext, str) and ext else path.rpartition(".")[2]
    return _MEDIA_TYPES.get(suffix.lower().lstrip("."), "application/octet-stream")


def card_charx(
    persona: Persona, image: CleanImage | None, assets: Sequence[CharxAsset] = ()
) -> bytes:
    """The persona as a CHARX: its V3 card, its avatar (``None``: it has none) as the
    card's ``main`` icon, and the ``assets`` kept from its import."""
    return write_charx(persona_to_card(persona, "v3"), image.data if image else None, assets)


def write_charx(
    card: dict[str, Any], icon: bytes | None, assets: Sequence[CharxAsset] = ()
) -> bytes:
    """A CHARX of ``card`` (a V3 card's JSON data), its ``icon`` (PNG bytes), which
    replaces any ``main`` icon the card lists, and ``assets`` at their paths; the card's
    other embedded assets are left out (their files are not here)."""
    card = copy.deepcopy(card)
    data = card.get("data")
    kept = {asset.path for asset in assets if asset.path != ICON_PATH}
    if isinstance(data, dict):
        _point_assets(data, icon is not None, kept)
    entries = [(CARD_ENTRY, json.dumps(card, ensure_ascii=False).encode(), zipfile.ZIP_DEFLATED)]
    if icon is not None:
        entries.append((ICON_PATH, icon, zipfile.ZIP_STORED))  # a PNG is compressed already
    entries += [
        (asset.path, asset.data, zipfile.ZIP_DEFLATED) for asset in assets if asset.path in kept
    ]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content, compression in entries:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = compression
            archive.writestr(info, content)
    return buffer.getvalue()


def _point_assets(data: dict[str, Any], has_icon: bool, written: set[str]) -> None:
    """``data.assets`` as the zip has them: no embedded asset but the icon and those
    ``written`` (at their paths)."""
    assets = data.get("assets")
    if not isinstance(assets, list):
        if not has_icon:
            return
        assets = []
    kept = [
        asset
        for asset in assets
        if not (isinstance(asset, dict) and _dropped(asset, written))
        and not (has_icon and _is_main_icon(asset))
    ]
    if has_icon:
        icon = {"type": "icon", "uri": EMBEDDED + ICON_PATH, "name": "main", "ext": "png"}
        kept.insert(0, icon)
    data["assets"] = kept


def _dropped(asset: dict[str, Any], kept: set[str]) -> bool:
    """Whether ``asset`` is embedded and its file not in the zip written."""
    path = _embedded_path(asset)
    return path is not None and path not in kept


def _is_main_icon(asset: Any) -> bool:
    return isinstance(asset, dict) and asset.get("type") == "icon" and asset.get("name") == "main"
