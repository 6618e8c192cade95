"""The images of conversations (``pa_media``): each stored once a conversation by the hash
of its prepared bytes, read back for the model's prompt and for the REST media route."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Column,
    Integer,
    LargeBinary,
    String,
    Table,
    bindparam,
    delete,
    insert,
    select,
)

from persona_agent.db import GroupCommitWriter, metadata
from persona_agent.media.images import ImageInput

__all__ = ["DELETE_CONVERSATION_MEDIA", "MediaStore", "StoredImage", "media_table"]

media_table = Table(
    "pa_media",
    metadata,
    Column("conversation", String(400), primary_key=True),  # the conversation's key
    Column("sha256", String(64), primary_key=True),  # of data, hex
    Column("media_type", String(40), nullable=False),
    Column("bytes", Integer, nullable=False),
    Column("width", Integer, nullable=False),
    Column("height", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),  # downscaled, re-encoded, no metadata
    Column("created_ms", BigInteger, nullable=False),
)
"""One row per (conversation, sha256); deleted with the conversation."""

_M = media_table.c

DELETE_CONVERSATION_MEDIA = delete(media_table).where(_M.conversation == bindparam("c"))
"""Deletes the images of the conversation ``c`` (with it, in its transaction)."""


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
        self._insert = insert(media_table)
        self._known = select(_M.sha256).where(_M.conversation == bindparam("conversation"))
        self._read = select(_M.sha256, _M.media_type, _M.data).where(
            _M.conversation == bindparam("conversation"), _M.sha256 == bindparam("sha256")
        )

    async def keep(self, conversation: str, images: Sequence[ImageInput]) -> None:
        """Store the images the conversation does not have yet (the conversation's lock
        held)."""
        if not images:
            return
        rows = await self._db.fetch(self._known, {"conversation": conversation})
        have = {row[0] for row in rows}
        now = int(time.time() * 1000)
        new: dict[str, ImageInput] = {i.sha256: i for i in images if i.sha256 not in have}
        if new:
            await self._db.write(
                self._insert,
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
            self._db.fetch(self._read, {"conversation": conversation, "sha256": sha256})
            for sha256 in sorted(set(hashes))
        ]
        found = [row for rows in await asyncio.gather(*reads) for row in rows]
        return {row[0]: StoredImage(row[0], row[1], bytes(row[2])) for row in found}
