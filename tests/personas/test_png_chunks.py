"""A card is read from a PNG's chunks without decoding its pixels; avatars are scaled down
when they are taken in."""

from __future__ import annotations

import base64
import io
import json
import struct
import zlib

import pytest
from PIL import Image, PngImagePlugin

from persona_agent.personas.formats.png import (
    AVATAR_MAX_SIDE,
    MAX_IMAGE_PIXELS,
    ImageError,
    clean_image,
    png_card_text,
)
from persona_agent.personas.formats.png_chunks import PNG_SIGNATURE
from tests.personas.cards import MIRA_V2, card_png, encoded, picture, pixels


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_of(width: int, height: int, *chunks: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return PNG_SIGNATURE + chunk(b"IHDR", header) + b"".join(chunks) + chunk(b"IEND", b"")


def test_the_card_is_read_without_decoding_a_pixel() -> None:
    # 4096 x 4096, and image data that no decoder could read: only the chunks are read.
    card = encoded(MIRA_V2).encode()
    raw = png_of(
        4096, 4096, chunk(b"IDAT", b"not deflate at all"), chunk(b"tEXt", b"chara\0" + card)
    )
    found = png_card_text(raw)
    assert found is not None
    assert found[0] == "chara"
    assert json.loads(found[1]) == MIRA_V2
    with pytest.raises(ImageError, match="damaged"):
        clean_image(raw)  # the avatar needs the pixels: that is where a bad image is refused


def test_compressed_card_chunks_are_read_and_bounded() -> None:
    card = encoded(MIRA_V2).encode()
    ztxt = chunk(b"zTXt", b"chara\0\0" + zlib.compress(card))
    itxt = chunk(b"iTXt", b"ccv3\0\1\0en\0\0" + zlib.compress(card))
    text = json.dumps(MIRA_V2)
    assert png_card_text(png_of(8, 8, ztxt)) == ("chara", text)
    assert png_card_text(png_of(8, 8, ztxt, itxt)) == ("ccv3", text)
    bomb = chunk(b"zTXt", b"chara\0\0" + zlib.compress(b"A" * 10_000_000))  # 10 KB deflated
    with pytest.raises(ImageError, match="inflates to more than 1,000 characters"):
        png_card_text(png_of(8, 8, bomb), max_chars=1000)
    assert png_card_text(png_of(8, 8, chunk(b"tEXt", b"other\0" + card))) is None


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"GIF89a", "not a PNG file"),
        (png_of(8, 8)[:-3], "cut short"),
        (png_of(8, 8, chunk(b"tEXt", b"chara\0x"))[:-20] + b"\0" * 4 + png_of(8, 8)[-20:], "CRC"),
        (PNG_SIGNATURE + chunk(b"tEXt", b"chara\0x"), "IHDR"),
        (png_of(5000, 5000), f"5000 × 5000 pixels, more than {MAX_IMAGE_PIXELS:,} in all"),
    ],
)
def test_a_bad_png_is_refused_naming_the_problem(raw: bytes, problem: str) -> None:
    with pytest.raises(ImageError, match=problem):
        png_card_text(raw)


def test_what_pillow_reads_is_read_the_same() -> None:
    raw = card_png({**MIRA_V2, "spec": "chara_card_v3"}, picture((30, 20)))  # chara and ccv3
    found = png_card_text(raw)
    with Image.open(io.BytesIO(raw)) as image:
        image.load()
        assert found == ("ccv3", base64.b64decode(image.info["ccv3"]).decode())


@pytest.mark.parametrize(
    ("size", "scaled"),
    [((3000, 1500), (1024, 512)), ((600, 2400), (256, 1024)), ((1024, 20), (1024, 20))],
)
def test_an_avatar_larger_than_the_maximum_is_scaled_down(
    size: tuple[int, int], scaled: tuple[int, int]
) -> None:
    output = io.BytesIO()
    info = PngImagePlugin.PngInfo()
    info.add_text("chara", "a card")
    Image.new("RGBA", size, (10, 20, 30, 255)).save(output, "PNG", pnginfo=info)
    cleaned = clean_image(output.getvalue())
    with Image.open(io.BytesIO(cleaned.data)) as image:
        assert image.size == scaled
        assert image.mode == "RGBA"
        assert max(image.size) <= AVATAR_MAX_SIDE
        assert "chara" not in image.info


def test_a_small_avatar_keeps_its_pixels_and_a_jpeg_is_decoded_small() -> None:
    image = picture((40, 50))
    output = io.BytesIO()
    image.save(output, "PNG")
    assert pixels(clean_image(output.getvalue()).data) == pixels(output.getvalue())
    jpeg = io.BytesIO()
    Image.new("RGB", (4000, 3000), (200, 100, 50)).save(jpeg, "JPEG")
    with Image.open(io.BytesIO(clean_image(jpeg.getvalue()).data)) as scaled:
        assert scaled.size == (1024, 768)
