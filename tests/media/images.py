"""Images made by the tests (Pillow), and a PNG whose header claims more pixels than any
limit (a decompression bomb: small on the wire, gigabytes once decoded)."""

from __future__ import annotations

import io
import struct
import zlib

from PIL import Image, PngImagePlugin

__all__ = ["bomb_png", "image_bytes"]


def image_bytes(
    fmt: str, size: tuple[int, int] = (64, 48), *, text: str = "", frames: int = 1
) -> bytes:
    """An image of ``fmt`` (PNG, JPEG, WEBP, GIF) with a gradient; a PNG with ``text`` in
    a tEXt chunk (metadata the hub must strip); a GIF of ``frames`` frames."""
    image = Image.linear_gradient("L").resize(size).convert("RGB")
    buffer = io.BytesIO()
    if fmt == "PNG" and text:
        info = PngImagePlugin.PngInfo()
        info.add_text("Comment", text)
        image.save(buffer, format="PNG", pnginfo=info)
    elif fmt == "GIF" and frames > 1:
        others = [Image.new("RGB", size, (255, 0, 0)) for _ in range(frames - 1)]
        image.save(buffer, format="GIF", save_all=True, append_images=others)
    else:
        image.save(buffer, format=fmt)
    return buffer.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def bomb_png(side: int = 30_000) -> bytes:
    """A 1-bit PNG of ``side``×``side`` pixels, all zero: a few tens of KB that would decode
    into ``side²`` pixels (900 million by default)."""
    row = b"\x00" + b"\x00" * ((side + 7) // 8)
    compressor = zlib.compressobj(9)
    data = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", data)
        + _chunk(b"IEND", b"")
    )
