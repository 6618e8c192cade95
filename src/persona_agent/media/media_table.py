"""The images' table (``pa_media``), made on the hub's :data:`persona_agent.db.metadata`
(read and written by :mod:`persona_agent.media.media_store`, which names it in its SQL)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, LargeBinary, String, Table

from persona_agent.db import metadata

__all__ = ["media_table"]

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
