"""One image part made ready for a model: its format sniffed from the bytes, refused when
it would decode into more pixels than the limit (before decoding), its first frame taken,
turned upright, scaled down to the longest side the models take, and re-encoded without
its metadata."""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

from persona_agent.errors import PersonaAgentError

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
    """What an image part may be (the ``PERSONA_AGENT_IMAGE_*`` settings)."""

    max_bytes: int = 10 * 1024 * 1024
    """The most bytes an image may have, sent or fetched."""
    max_pixels: int = 40_000_000
    """The most pixels an image may decode into (width × height, read from its header)."""
    max_side: int = 1568
    """Longer sides are scaled down to this (what vision models take)."""
    fetch_seconds: float = 10.0
    """The most an image URL's fetch may take, redirects included."""


@dataclass(frozen=True, slots=True)
class ImageInput:
    """An image ready for the model: re-encoded bytes and what the history keeps of it."""

    sha256: str
    media_type: str
    name: str
    width: int
    height: int
    data: bytes

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


def prepare_image(data: bytes, name: str, limits: ImageLimits, where: str) -> ImageInput:
    """The image of ``data`` made ready (see the module); CPU work: call it in a worker
    thread. ``where`` names the part in errors (``Part 2 (cat.png)``).

    Raises:
        ImageError: too many bytes or pixels, not a PNG, JPEG, WebP or GIF, or broken.
    """
    if len(data) > limits.max_bytes:
        raise ImageError(
            f"{where} has {len(data):,} bytes: images may have {limits.max_bytes:,} at most"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=tuple(_FORMATS)) as image:
                return _ready(image, name, limits, where)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise ImageError(f"{where} is refused: a decompression bomb ({error})") from error
    except UnidentifiedImageError as error:
        raise ImageError(f"{where} is not a PNG, JPEG, WebP or GIF image") from error
    except (OSError, SyntaxError, ValueError, EOFError) as error:
        raise ImageError(f"{where} cannot be decoded: {error}") from error


def _ready(image: Image.Image, name: str, limits: ImageLimits, where: str) -> ImageInput:
    kind = image.format or ""
    width, height = image.size
    if width * height > limits.max_pixels:  # read from the header: nothing is decoded yet
        raise ImageError(
            f"{where} is refused: {width}×{height} is {width * height:,} pixels, more than "
            f"the {limits.max_pixels:,} an image may have (a decompression bomb?)"
        )
    scale = min(1.0, limits.max_side / max(width, height))
    if kind == "JPEG" and scale < 1:  # decode at 1/2, 1/4 or 1/8 when that is enough
        image.draft("RGB", (max(1, int(width * scale)), max(1, int(height * scale))))
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
    )


def _mode(image: Image.Image, output: str) -> str:
    has_alpha = image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info
    if output == "JPEG":
        return "RGB"
    return "RGBA" if has_alpha else "RGB"
