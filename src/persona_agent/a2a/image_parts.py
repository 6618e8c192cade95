"""A message's image parts (bytes or URL) made ready for the engine: fetched under the URL
guard's rules, then prepared in a worker thread (:mod:`persona_agent.media`)."""

from __future__ import annotations

import asyncio

from a2a.types.a2a_pb2 import Message

from persona_agent.media.fetch import ImageFetcher
from persona_agent.media.images import IMAGE_TYPES, ImageInput, ImageLimits, prepare_image
from persona_agent.security.push_urls import PushUrlGuard

__all__ = ["NO_INTAKE", "ImageIntake"]


class ImageIntake:
    """Reads a message's images; ``limits``: what each may be; ``guard``: which URLs the
    hub fetches (by default, public addresses only)."""

    def __init__(self, limits: ImageLimits | None = None, guard: PushUrlGuard | None = None):
        self.limits = limits or ImageLimits()
        self.fetcher = ImageFetcher(guard or PushUrlGuard(), self.limits)

    async def read(self, message: Message) -> tuple[ImageInput, ...]:
        """The message's images in their order, one per content hash (check_parts let
        through only those of a persona that sees).

        Raises:
            ImageError: one cannot be fetched or read (the part is named).
        """
        images: dict[str, ImageInput] = {}
        for index, part in enumerate(message.parts):
            kind = part.WhichOneof("content")
            if kind not in ("raw", "url") or part.media_type not in IMAGE_TYPES:
                continue
            name = part.filename or (part.url.rsplit("/", 1)[-1] if kind == "url" else "")
            name = name[:200] or f"image-{index}"
            where = f"Part {index} ({name})"
            data = part.raw if kind == "raw" else await self.fetcher.fetch(part.url, where)
            image = await asyncio.to_thread(prepare_image, data, name, self.limits, where)
            images.setdefault(image.sha256, image)
        return tuple(images.values())


NO_INTAKE = ImageIntake()
"""The default limits, public URLs only."""
