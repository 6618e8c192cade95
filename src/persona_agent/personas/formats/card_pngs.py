"""Exported PNG cards, kept: encoding one costs a second or more of CPU (the avatar decoded
and compressed again), so each (persona version, format, avatar) is encoded once, in a worker
thread, and kept within a memory bound (``PERSONA_AGENT_CARD_PNG_CACHE_BYTES``), the least
recently asked for dropped first. Callers asking for the same card at once share one
encoding.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from persona_agent.personas.formats.png import CleanImage
from persona_agent.personas.formats.tavern import CardSpec, card_png
from persona_agent.personas.model import Persona

__all__ = ["CardPngs"]

_Key = tuple[str, str, str, str | None]
"""Persona id, version, card format, avatar etag (``None``: the plain picture)."""


class CardPngs:
    """PNG cards by persona version, format and avatar, at most ``max_bytes`` of them
    (``0``: none kept, every export encodes again, still in a worker thread)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._kept: OrderedDict[_Key, bytes] = OrderedDict()
        self._size = 0
        self._encoding: dict[_Key, asyncio.Future[bytes]] = {}
        self.encoded = 0
        """How many cards were encoded (the others were served as kept)."""

    @property
    def size(self) -> int:
        """Bytes kept now."""
        return self._size

    async def get(self, persona: Persona, spec: CardSpec, image: CleanImage | None) -> bytes:
        """The PNG card of ``persona`` in ``spec`` with ``image`` (or a plain picture)."""
        key: _Key = (persona.id, persona.version, spec, image.etag if image else None)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        encoding = self._encoding.get(key)
        if encoding is None:
            # A task of its own: a caller that goes away does not stop the others' card.
            encoding = asyncio.ensure_future(self._encode(key, persona, spec, image))
            encoding.add_done_callback(_retrieved)
            self._encoding[key] = encoding
        return await asyncio.shield(encoding)

    async def _encode(
        self, key: _Key, persona: Persona, spec: CardSpec, image: CleanImage | None
    ) -> bytes:
        try:
            png = await asyncio.to_thread(card_png, persona, spec, image)
        finally:
            del self._encoding[key]
        self.encoded += 1
        self._keep(key, png)
        return png

    def _keep(self, key: _Key, png: bytes) -> None:
        if len(png) > self.max_bytes:
            return
        self._kept[key] = png
        self._size += len(png)
        while self._size > self.max_bytes:
            _, dropped = self._kept.popitem(last=False)
            self._size -= len(dropped)


def _retrieved(task: asyncio.Future[bytes]) -> None:
    """Mark a failed encoding's error as seen: its callers may all have gone."""
    if not task.cancelled():
        task.exception()
