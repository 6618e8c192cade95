"""Character cards in PNG files, and avatar images, with Pillow.

A card travels in a PNG ``tEXt`` chunk, base64 of its UTF-8 JSON: ``chara`` for V2,
``ccv3`` for V3 (a V3 file usually has both; ``ccv3`` wins). The image is the
character's avatar. Images are untrusted input: the card is read from the file's chunks
without decoding a pixel (:mod:`persona_agent.personas.formats.png_chunks`), an image's size is
checked from its header before it is decoded, and an avatar is re-encoded without text
chunks, so what is served as an avatar never carries the card (the persona's prompt)
along with it, and scaled down to :data:`AVATAR_MAX_SIDE`, so what is stored, served and
exported stays small whatever was uploaded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

from persona_agent.personas.formats.png_chunks import ChunkError, read_png_text

if TYPE_CHECKING:
    from PIL import Image

# Pillow is imported by the functions that use it: it costs ~45 ms, which every start of
# the hub (and of every CLI command) would pay for personas that are mostly not cards.

__all__ = [
    "AVATAR_MAX_SIDE",
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

MAX_IMAGE_PIXELS = 4096 * 4096
"""The largest image taken (width × height), 4096 × 4096: far above any avatar; decoding it
takes at most 64 MiB (four bytes a pixel), checked from the header before decoding."""

AVATAR_MAX_SIDE = 1024
"""An avatar is scaled down (its proportions kept) to at most this many pixels on its
longer side when it is taken in: what is stored, served and exported is at most about
4 MiB decoded, whatever was uploaded."""


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
    _check_pixels(*image.size)
    return image


def _check_pixels(width: int, height: int) -> None:
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageError(
            f"the image is {width} × {height} pixels, more than {MAX_IMAGE_PIXELS:,} in all"
        )


def _load(image: Image.Image) -> None:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image.load()
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombWarning) as error:
        raise ImageError(f"the image is damaged ({error})") from None


def png_card_text(raw: bytes, *, max_chars: int = 64 * 1024 * 1024) -> tuple[str, str] | None:
    """The card in a PNG: ``(chunk name, JSON text)``, or ``None`` when the PNG carries
    no card chunk (a plain image). Read from the file's chunks: no pixel is decoded.

    Raises:
        ImageError: not a PNG, a damaged one, one of too many pixels, or a card chunk that
            is not base64 of UTF-8 text or inflates to more than ``max_chars``.
    """
    try:
        found = read_png_text(raw, CARD_CHUNKS, max_chars=max_chars)
    except ChunkError as error:
        raise ImageError(str(error)) from None
    _check_pixels(found.width, found.height)
    texts = found.texts
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


def clean_image(raw: bytes, max_side: int = AVATAR_MAX_SIDE) -> CleanImage:
    """The image re-encoded as PNG with no text chunks, its mode kept: its pixels as they
    are, or scaled down to ``max_side`` on its longer side (proportions kept) if larger.
    A JPEG is decoded at the smallest scale that is still large enough.

    Raises:
        ImageError: not an image, damaged, or too large.
    """
    from PIL import Image

    image = _open(raw)
    image.draft(None, (max_side, max_side))  # JPEG: decode at 1/2, 1/4 or 1/8 (others: no-op)
    _load(image)
    if getattr(image, "n_frames", 1) > 1:
        image.seek(0)  # an animation: its first frame
    if max(image.size) > max_side:
        try:
            image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
        except (OSError, ValueError) as error:
            raise ImageError(f"the image cannot be scaled down ({error})") from None
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


def placeholder_image(seed: str, name: str = "") -> bytes:
    """A 400 × 600 PNG card drawn for a persona that has no avatar: a colour of its own
    (from ``seed``), its initials in a disc, and ``name`` written under them."""
    from PIL import Image, ImageDraw, ImageFont

    digest = hashlib.sha256(seed.encode("utf-8")).digest()
    colour = (40 + digest[0] // 3, 40 + digest[1] // 3, 40 + digest[2] // 3)
    light = tuple(min(255, c + 110) for c in colour)
    picture = Image.new("RGB", (400, 600), colour)
    draw = ImageDraw.Draw(picture)
    for row in range(600):  # a gentle fall of light, top to bottom
        shade = tuple(max(0, c - row // 12) for c in colour)
        draw.line([(0, row), (399, row)], fill=shade)
    draw.ellipse([100, 120, 300, 320], fill=light)
    words = name.split()
    initials = "".join(word[0] for word in words[:2]).upper() or "?"
    draw.text((200, 220), initials, fill=colour, font=ImageFont.load_default(size=88), anchor="mm")
    font = ImageFont.load_default(size=30)
    lines: list[str] = []
    for word in words:
        if lines and draw.textlength(f"{lines[-1]} {word}", font=font) <= 340:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    for number, line in enumerate(lines[:4]):
        draw.text((200, 390 + number * 40), line, fill=(255, 255, 255), font=font, anchor="mm")
    output = io.BytesIO()
    picture.save(output, "PNG")
    return output.getvalue()
