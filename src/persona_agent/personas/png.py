"""Character cards in PNG files, and avatar images, with Pillow.

A card travels in a PNG ``tEXt`` chunk, base64 of its UTF-8 JSON: ``chara`` for V2,
``ccv3`` for V3 (a V3 file usually has both; ``ccv3`` wins). The image is the
character's avatar. Images are untrusted input: their size is checked from the header
before any pixel is decoded, and an avatar is re-encoded without text chunks, so what
is served as an avatar never carries the card (the persona's prompt) along with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL import Image

# Pillow is imported by the functions that use it: it costs ~45 ms, which every start of
# the hub (and of every CLI command) would pay for personas that are mostly not cards.

__all__ = [
    "CARD_CHUNKS",
    "MAX_IMAGE_PIXELS",
    "CleanImage",
    "ImageError",
    "clean_image",
    "placeholder_image",
    "png_card_text",
    "png_with_chunks",
]

CARD_CHUNKS = ("ccv3", "chara")
"""The text chunks a card may be in, the preferred one first."""

MAX_IMAGE_PIXELS = 40_000_000
"""The largest image taken (width × height), about 6300 × 6300: far above any avatar,
far below what would take the memory of a small server to decode."""

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ImageError(ValueError):
    """The bytes are not an image this hub takes; the message says why."""


@dataclass(frozen=True, slots=True)
class CleanImage:
    """An image re-encoded as PNG without text chunks."""

    data: bytes
    media_type: str
    etag: str


def _open(raw: bytes) -> Image.Image:
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(raw))
    except (UnidentifiedImageError, Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise ImageError("not an image (PNG, JPEG, WebP or GIF) that can be read") from None
    except (OSError, ValueError, SyntaxError) as error:
        raise ImageError(f"the image is damaged ({error})") from None
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageError(
            f"the image is {width} × {height} pixels, more than {MAX_IMAGE_PIXELS:,} in all"
        )
    return image


def _load(image: Image.Image) -> None:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombWarning) as error:
        raise ImageError(f"the image is damaged ({error})") from None


def png_card_text(raw: bytes) -> tuple[str, str] | None:
    """The card in a PNG: ``(chunk name, JSON text)``, or ``None`` when the PNG carries
    no card chunk (a plain image).

    Raises:
        ImageError: not a PNG, a damaged one, or a card chunk that is not base64 of
            UTF-8 text.
    """
    if not raw.startswith(PNG_SIGNATURE):
        raise ImageError("not a PNG file (a card image must be PNG)")
    image = _open(raw)
    _load(image)  # text chunks after the image data are read with it
    texts = {**image.info, **getattr(image, "text", {})}
    for name in CARD_CHUNKS:
        value = texts.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ImageError(f"the '{name}' chunk is not text")
        try:
            decoded = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ImageError(f"the '{name}' chunk is not base64") from None
        try:
            return name, decoded.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ImageError(f"the '{name}' chunk is not base64 of UTF-8 text") from None
    return None


def clean_image(raw: bytes) -> CleanImage:
    """The image re-encoded as PNG with no text chunks (its pixels, size and mode kept).

    Raises:
        ImageError: not an image, damaged, or too large.
    """
    image = _open(raw)
    _load(image)
    if getattr(image, "n_frames", 1) > 1:
        image.seek(0)  # an animation: its first frame
    output = io.BytesIO()
    params = {}
    if "transparency" in image.info:
        params["transparency"] = image.info["transparency"]
    try:
        image.save(output, "PNG", **params)
    except (OSError, ValueError) as error:
        raise ImageError(f"the image cannot be stored as PNG ({error})") from None
    data = output.getvalue()
    return CleanImage(data, "image/png", hashlib.sha256(data).hexdigest()[:32])


def png_with_chunks(image_png: bytes, chunks: dict[str, str]) -> bytes:
    """``image_png`` (a PNG, as :func:`clean_image` gives) with these text chunks added,
    each value base64 of its UTF-8 text; its pixels unchanged."""
    from PIL import PngImagePlugin

    image = _open(image_png)
    _load(image)
    info = PngImagePlugin.PngInfo()
    for name, text in chunks.items():
        info.add_text(name, base64.b64encode(text.encode("utf-8")).decode("ascii"))
    params: dict[str, object] = {"pnginfo": info}
    if "transparency" in image.info:
        params["transparency"] = image.info["transparency"]
    output = io.BytesIO()
    image.save(output, "PNG", **params)
    return output.getvalue()


def placeholder_image(seed: str) -> bytes:
    """A plain 400 × 600 PNG whose colour comes from ``seed``: the picture of a card
    exported from a persona that has no avatar."""
    from PIL import Image

    digest = hashlib.sha256(seed.encode("utf-8")).digest()
    colour = (64 + digest[0] // 2, 64 + digest[1] // 2, 64 + digest[2] // 2)
    output = io.BytesIO()
    Image.new("RGB", (400, 600), colour).save(output, "PNG")
    return output.getvalue()
