"""The personas' CHARX assets' table (``pa_persona_assets``), made on the hub's
:data:`persona_agent.db.metadata` (read and written by
:mod:`persona_agent.personas.stores.asset_store`, which names it in its SQL)."""

from __future__ import annotations

from sqlalchemy import Column, LargeBinary, String, Table

from persona_agent.db import metadata
from persona_agent.personas.formats.charx import MAX_ASSET_PATH

__all__ = ["persona_assets_table"]

persona_assets_table = Table(
    "pa_persona_assets",
    metadata,
    Column("persona_id", String(63), primary_key=True),
    Column("path", String(MAX_ASSET_PATH), primary_key=True),  # in the CHARX it came in
    Column("media_type", String(100), nullable=False),
    Column("data", LargeBinary, nullable=False),
)
"""Each persona's CHARX assets but its icon
(:class:`~persona_agent.personas.stores.asset_store.PersonaAssets`)."""
