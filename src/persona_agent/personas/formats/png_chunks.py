"""A PNG's size and text chunks, read from the file's chunk structure: no pixel is decoded.

Reading a card out of a PNG needs its ``tEXt``/``zTXt``/``iTXt`` chunks only. Pillow reads
text chunks that come after the image data only by decoding the image, and a 6300 × 6300
PNG of 170 KB decodes to 160 MB (a hub answering ``/validate`` peaked at 1.3 GB); walking
the chunks is linear in the file and holds nothing but the chunks asked for. Every chunk's
CRC is checked, as a decoder would; a compressed text chunk is inflated up to a bound.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["PNG_SIGNATURE", "ChunkError", "PngText", "read_png_text"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ChunkError(ValueError):
    """The bytes are not a well-formed PNG; the message says where."""


@dataclass(frozen=True, slots=True)
class PngText:
    """What :func:`read_png_text` found: the image's size and the text chunks asked for."""

    width: int
    height: int
    texts: dict[str, str]


def read_png_text(raw: bytes, names: Collection[str], *, max_chars: int) -> PngText:
    """The size (from ``IHDR``) and the text chunks called ``names`` of the PNG ``raw``; a
    later chunk of the same name replaces an earlier one, as in Pillow.

    Raises:
        ChunkError: not a PNG, a chunk cut short or with a wrong CRC, no ``IHDR`` first, or
            a text chunk asked for that is not text or inflates to more than ``max_chars``.
    """
    if not raw.startswith(PNG_SIGNATURE):
        raise ChunkError("not a PNG file (a card image must be PNG)")
    view = memoryview(raw)
    position = len(PNG_SIGNATURE)
    width = height = -1
    texts: dict[str, str] = {}
    while position < len(raw):
        if position + 12 > len(raw):
            raise ChunkError(f"the PNG is damaged (a chunk is cut short at byte {position})")
        length = int.from_bytes(raw[position : position + 4], "big")
        kind = bytes(raw[position + 4 : position + 8])
        end = position + 8 + length
        if end + 4 > len(raw):
            raise ChunkError(f"the PNG is damaged (the {kind!r} chunk runs past the end)")
        crc = int.from_bytes(raw[end : end + 4], "big")
        if zlib.crc32(view[position + 4 : end]) != crc:
            raise ChunkError(f"the PNG is damaged (the {kind!r} chunk's CRC is wrong)")
        data = view[position + 8 : end]
        if width < 0:
            if kind != b"IHDR" or length != 13:
                raise ChunkError("the PNG is damaged (it does not start with its IHDR chunk)")
            width = int.from_bytes(data[0:4], "big")
            height = int.from_bytes(data[4:8], "big")
        elif kind == b"IEND":
            break
        elif kind in (b"tEXt", b"zTXt", b"iTXt"):
            name = bytes(data[:80]).partition(b"\0")[0].decode("latin-1")
            if name in names:
                texts[name] = _text(kind, bytes(data), name, max_chars)
        position = end + 4
    if width < 0:
        raise ChunkError("the PNG is damaged (it has no IHDR chunk)")
    return PngText(width, height, texts)


def _text(kind: bytes, data: bytes, name: str, max_chars: int) -> str:
    """The text of a ``tEXt`` (Latin-1), ``zTXt`` (Latin-1, deflated) or ``iTXt`` (UTF-8,
    maybe deflated) chunk, without its keyword."""
    body = data.partition(b"\0")[2]
    if kind == b"tEXt":
        return body.decode("latin-1")
    if kind == b"zTXt":
        if not body or body[0] != 0:
            raise ChunkError(f"the '{name}' chunk has an unknown compression method")
        return _inflate(body[1:], name, max_chars).decode("latin-1")
    if len(body) < 2:
        raise ChunkError(f"the '{name}' chunk is damaged")
    compressed, method = body[0], body[1]
    _language, _, rest = body[2:].partition(b"\0")
    _translated, _, text = rest.partition(b"\0")
    if compressed:
        if method != 0:
            raise ChunkError(f"the '{name}' chunk has an unknown compression method")
        text = _inflate(text, name, max_chars)
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        raise ChunkError(f"the '{name}' chunk is not UTF-8 text") from None


def _inflate(data: bytes, name: str, max_chars: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(data, max_chars + 1)
    except zlib.error:
        raise ChunkError(f"the '{name}' chunk is damaged (it does not inflate)") from None
    if len(text) > max_chars:
        raise ChunkError(f"the '{name}' chunk inflates to more than {max_chars:,} characters")
    return text
