"""The images' table: each image a conversation was sent, stored once by its content hash
(:mod:`persona_agent.media.media_store`), made on the hub's :data:`persona_agent.db.metadata` by
:mod:`persona_agent.db` (a module of its own: that one keeps to the house's size)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, MetaData, String, Table

__all__ = ["media"]


def media(metadata: MetaData) -> Table:
    """``pa_media`` on ``metadata``: one row per (conversation, sha256), ``conversation``
    being the history's key (``pa_messages.conversation``); deleted with it."""
    return Table(
        "pa_media",
        metadata,
        Column("conversation", String(400), primary_key=True),
        Column("sha256", String(64), primary_key=True),  # of data, hex
        Column("media_type", String(40), nullable=False),
        Column("bytes", Integer, nullable=False),
        Column("width", Integer, nullable=False),
        Column("height", Integer, nullable=False),
        Column("data", LargeBinary, nullable=False),  # downscaled, re-encoded, no metadata
        Column("created_ms", BigInteger, nullable=False),
    )
