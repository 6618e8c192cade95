"""The images of conversations (``pa_media``): each stored once a conversation by the hash
of its prepared bytes, read back for the model's prompt and for the REST media route. The
table is defined in :mod:`.media_table`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.media.images import ImageInput

__all__ = ["DELETE_CONVERSATION_MEDIA", "MediaStore", "StoredImage"]

_TABLE = "pa_media"

DELETE_CONVERSATION_MEDIA = Sql(
    f"DELETE FROM {_TABLE} WHERE {_TABLE}.conversation = :c", table=_TABLE
)
"""Deletes the images of the conversation ``c`` (with it, in its transaction)."""

_INSERT = Sql(
    f"INSERT INTO {_TABLE} (conversation, sha256, media_type, bytes, width, height, data, "
    "created_ms) VALUES (:conversation, :sha256, :media_type, :bytes, :width, :height, :data, "
    ":created_ms)",
    table=_TABLE,
)
_KNOWN = Sql(
    f"SELECT {_TABLE}.sha256 FROM {_TABLE} WHERE {_TABLE}.conversation = :conversation",
    table=_TABLE,
)
_READ = Sql(
    f"SELECT {_TABLE}.sha256, {_TABLE}.media_type, {_TABLE}.data FROM {_TABLE} "
    f"WHERE {_TABLE}.conversation = :conversation AND {_TABLE}.sha256 = :sha256",
    table=_TABLE,
)


@dataclass(frozen=True, slots=True)
class StoredImage:
    sha256: str
    media_type: str
    data: bytes


class MediaStore:
    """Rows of ``pa_media`` through the hub's group-commit writer. Writes of one
    conversation are made under its lock (the engine's turn), so a hash is looked up and
    inserted without a race."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer

    async def keep(self, conversation: str, images: Sequence[ImageInput]) -> None:
        """Store the images the conversation does not have yet (the conversation's lock
        held)."""
        if not images:
            return
        rows = await self._db.fetch(_KNOWN, {"conversation": conversation})
        have = {row[0] for row in rows}
        now = int(time.time() * 1000)
        new: dict[str, ImageInput] = {i.sha256: i for i in images if i.sha256 not in have}
        if new:
            await self._db.write(
                _INSERT,
                [
                    {
                        "conversation": conversation,
                        "sha256": image.sha256,
                        "media_type": image.media_type,
                        "bytes": len(image.data),
                        "width": image.width,
                        "height": image.height,
                        "data": image.data,
                        "created_ms": now,
                    }
                    for image in new.values()
                ],
            )

    async def load(self, conversation: str, hashes: Iterable[str]) -> dict[str, StoredImage]:
        """The conversation's images of ``hashes`` it has, by hash (a query each, side by
        side: a prompt shows a few)."""
        reads = [
            self._db.fetch(_READ, {"conversation": conversation, "sha256": sha256})
            for sha256 in sorted(set(hashes))
        ]
        found = [row for rows in await asyncio.gather(*reads) for row in rows]
        return {row[0]: StoredImage(row[0], row[1], bytes(row[2])) for row in found}
