"""A message's image parts (bytes or URL) made ready for the engine: fetched under the URL
guard's rules, one after another within the message's budgets, then prepared in the hub's
image threads (:mod:`persona_agent.media`)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from a2a.types.a2a_pb2 import Message, Part

from persona_agent.media.fetch import ImageFetcher
from persona_agent.media.images import (
    IMAGE_TYPES,
    ImageError,
    ImageInput,
    ImageLimits,
    prepare_image,
)
from persona_agent.security.egress.push_urls import PushUrlGuard

__all__ = ["IMAGE_WORKERS", "NO_INTAKE", "ImageIntake", "is_image"]

IMAGE_WORKERS = 2
"""Threads of the hub that decode images (``PERSONA_AGENT_IMAGE_WORKERS``)."""


def is_image(part: Part) -> bool:
    """Whether ``part`` is an image part (bytes or URL of an image type)."""
    return part.WhichOneof("content") in ("raw", "url") and part.media_type in IMAGE_TYPES


class ImageIntake:
    """Reads a message's images; ``limits``: what each may be, and a message's together;
    ``guard``: which URLs the hub fetches (by default, public addresses only);
    ``workers``: the threads that decode and re-encode them, the hub's own (never the
    shared pool a document or a lore scan waits on): at most that many images are decoded
    at once, whatever the number of messages, each message's one at a time.

    A message's images are read one after another: each URL is fetched only once the one
    before it is prepared, its bytes dropped once it is, and only the prepared images are
    kept (scaled to the longest side the models take). A canceled task stops at its
    current await, and what it held is dropped with it; an image being decoded then is
    finished by its thread and thrown away.
    """

    def __init__(
        self,
        limits: ImageLimits | None = None,
        guard: PushUrlGuard | None = None,
        workers: int = IMAGE_WORKERS,
    ) -> None:
        self.limits = limits or ImageLimits()
        self.fetcher = ImageFetcher(guard or PushUrlGuard(), self.limits)
        # Its threads start with the first image: a hub sent none has none. Few threads:
        # each keeps its own malloc arena, so memory freed after a decode goes back to the
        # system when one or two threads did the work, not when many did.
        self._workers = ThreadPoolExecutor(workers, thread_name_prefix="images")

    async def read(self, message: Message) -> tuple[ImageInput, ...]:
        """The message's images in their order, one per content hash (check_parts let
        through only those of a persona that sees, within the message's limits).

        Raises:
            ImageError: one cannot be fetched or read, or the message's images pass
                what they may have together (the part and the setting are named).
        """
        images: dict[str, ImageInput] = {}
        try:
            await self._read_into(images, message)
            return tuple(images.values())
        finally:
            images.clear()  # a read that failed or was canceled holds nothing, traceback or not

    async def _read_into(self, images: dict[str, ImageInput], message: Message) -> None:
        """Read the message's images into ``images``, one at a time, within its budgets."""
        limits = self.limits
        received = kept = pixels = 0  # the message's bytes in, bytes kept, pixels decoded
        loop = asyncio.get_running_loop()
        for index, part in enumerate(message.parts):
            if not is_image(part):
                continue
            where, name = _named(part, index)
            if part.WhichOneof("content") == "url":
                data = await self.fetcher.fetch(part.url, where, limits.message_bytes - received)
            else:
                data = part.raw
            received += len(data)
            _within(received, limits.message_bytes, where, "sent and fetched")
            left = limits.message_pixels - pixels
            image = await loop.run_in_executor(
                self._workers, prepare_image, data, name, limits, where, left
            )
            del data  # the next fetch does not hold this one's bytes
            pixels += image.decoded_pixels
            if image.sha256 not in images:
                kept += len(image.data)
                _within(kept, limits.message_bytes, where, "prepared")
                images[image.sha256] = image

    def close(self) -> None:
        """Stop the image threads (the hub closes; no message is read any more)."""
        self._workers.shutdown(wait=False, cancel_futures=True)


def _named(part: Part, index: int) -> tuple[str, str]:
    """How errors name the part (``Part 2 (cat.png)``), and the image's name."""
    kind = part.WhichOneof("content")
    name = part.filename or (part.url.rsplit("/", 1)[-1] if kind == "url" else "")
    name = name[:200] or f"image-{index}"
    return f"Part {index} ({name})", name


def _within(total: int, limit: int, where: str, what: str) -> None:
    if total > limit:
        raise ImageError(
            f"{where} is refused: the message's images, {what}, would have {total:,} bytes, "
            f"more than the {limit:,} they may have together "
            "(PERSONA_AGENT_IMAGE_MESSAGE_BYTES): send fewer or smaller images"
        )


NO_INTAKE = ImageIntake()
"""The default limits, public URLs only."""
