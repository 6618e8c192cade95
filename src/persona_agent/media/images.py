"""One image part made ready for a model: its format sniffed from the bytes, refused when
it would decode into more pixels than the limit (read from its header, before decoding;
a JPEG is decoded at the 1/2, 1/4 or 1/8 scale its size needs), its first frame taken,
turned upright, scaled down to the longest side the models take, and re-encoded without
its metadata."""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from persona_agent.errors import PersonaAgentError

if TYPE_CHECKING:
    from PIL.Image import Image as PillowImage

__all__ = ["IMAGE_TYPES", "ImageError", "ImageInput", "ImageLimits", "prepare_image"]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
"""The media types of the image parts a persona that sees takes (bytes or URL)."""

_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
_OUTPUT = {"PNG": "PNG", "JPEG": "JPEG", "WEBP": "WEBP", "GIF": "PNG"}
"""What each format is stored as: a GIF's first frame becomes a PNG."""


class ImageError(PersonaAgentError):
    message = "An image of the message cannot be read"


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """What an image part may be, and a message's images together (the
    ``PERSONA_AGENT_IMAGE_*`` settings)."""

    max_bytes: int = 10 * 1024 * 1024
    """The most bytes an image may have, sent or fetched."""
    max_pixels: int = 25_000_000
    """The most pixels an image may decode into (width × height, read from its header; a
    JPEG's at the scale it is decoded at)."""
    max_side: int = 1568
    """Longer sides are scaled down to this (what vision models take)."""
    fetch_seconds: float = 10.0
    """The most an image URL's fetch may take, redirects included."""
    per_message: int = 16
    """The most image parts (bytes or URL) a message may have."""
    message_bytes: int = 32 * 1024 * 1024
    """The most bytes a message's images may have together: as sent and fetched, and
    again as prepared (what is kept and sent to the model)."""
    message_pixels: int = 100_000_000
    """The most pixels a message's images may decode into together."""


@dataclass(frozen=True, slots=True)
class ImageInput:
    """An image ready for the model: re-encoded bytes and what the history keeps of it."""

    sha256: str
    media_type: str
    name: str
    width: int
    height: int
    data: bytes
    decoded_pixels: int = 0
    """The pixels decoded to make it (counted against the message's budget)."""

    def meta(self) -> dict[str, Any]:
        """The entry of the stored user message's ``media`` (its bytes are not in it)."""
        return {
            "sha256": self.sha256,
            "mediaType": self.media_type,
            "name": self.name,
            "width": self.width,
            "height": self.height,
            "bytes": len(self.data),
        }


def prepare_image(
    data: bytes, name: str, limits: ImageLimits, where: str, pixels_left: int | None = None
) -> ImageInput:
    """The image of ``data`` made ready (see the module); CPU work: call it in a worker
    thread. ``where`` names the part in errors (``Part 2 (cat.png)``); ``pixels_left``:
    what the message's pixel budget has left (``None``: the whole of it).

    Raises:
        ImageError: too many bytes or pixels, not a PNG, JPEG, WebP or GIF, or broken.
    """
    # Pillow is imported by the first image only: a hub that is sent none does not load it.
    from PIL import Image, UnidentifiedImageError

    if len(data) > limits.max_bytes:
        raise ImageError(
            f"{where} has {len(data):,} bytes: images may have {limits.max_bytes:,} at most "
            "(PERSONA_AGENT_IMAGE_MAX_BYTES)"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=tuple(_FORMATS)) as image:
                left = limits.message_pixels if pixels_left is None else pixels_left
                return _ready(image, name, limits, where, left)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageError(f"{where} is refused: a decompression bomb ({error})") from error
    except UnidentifiedImageError as error:
        raise ImageError(f"{where} is not a PNG, JPEG, WebP or GIF image") from error
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        raise ImageError(f"{where} cannot be decoded: {error}") from error


def _ready(
    image: PillowImage, name: str, limits: ImageLimits, where: str, pixels_left: int
) -> ImageInput:
    from PIL import Image, ImageOps

    kind = image.format or ""
    width, height = image.size
    scale = min(1.0, limits.max_side / max(width, height))
    if kind == "JPEG" and scale < 1:  # decode at 1/2, 1/4 or 1/8 when that is enough
        image.draft("RGB", (max(1, int(width * scale)), max(1, int(height * scale))))
    pixels = _decoded_pixels(image, where, limits, pixels_left)
    image.seek(0)  # an animation's first frame
    image.load()
    if kind in ("JPEG", "WEBP"):
        ImageOps.exif_transpose(image, in_place=True)
    output = _OUTPUT[kind]
    mode = _mode(image, output)
    frame = image if image.mode == mode else image.convert(mode)
    frame.thumbnail((limits.max_side, limits.max_side), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    options: dict[str, Any] = {"quality": 85} if output in ("JPEG", "WEBP") else {}
    frame.save(buffer, format=output, **options)  # no metadata: none is passed on
    encoded = buffer.getvalue()
    return ImageInput(
        sha256=hashlib.sha256(encoded).hexdigest(),
        media_type=_FORMATS[output],
        name=name,
        width=frame.width,
        height=frame.height,
        data=encoded,
        decoded_pixels=pixels,
    )


def _decoded_pixels(image: PillowImage, where: str, limits: ImageLimits, left: int) -> int:
    """The pixels ``image`` decodes into (its size as the header says, after a JPEG's
    draft: nothing is decoded yet), refused over the image's limit or what the message's
    budget has ``left``."""
    width, height = image.size
    pixels = width * height
    if pixels > limits.max_pixels:
        raise ImageError(
            f"{where} is refused: {width}×{height} is {pixels:,} pixels to decode, more than "
            f"the {limits.max_pixels:,} an image may have (PERSONA_AGENT_IMAGE_MAX_PIXELS; "
            "a decompression bomb?)"
        )
    if pixels > left:
        raise ImageError(
            f"{where} is refused: its {pixels:,} pixels ({width}×{height}) would take the "
            f"message's images past the {limits.message_pixels:,} pixels they may decode "
            "into together (PERSONA_AGENT_IMAGE_MESSAGE_PIXELS): send fewer or smaller images"
        )
    return pixels


def _mode(image: PillowImage, output: str) -> str:
    has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    if output == "JPEG":
        return "RGB"
    return "RGBA" if has_alpha else "RGB"
