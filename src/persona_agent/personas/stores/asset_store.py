"""Where a persona's CHARX assets are kept (``pa_persona_assets``): the embedded files of
the CHARX it was imported from, besides its icon (the avatar), by their path in the zip.

An import of a persona replaces its assets (none, for a card that is not a CHARX); they go
when the persona is deleted. They are kept in the hub's database whichever store holds the
personas, so that every replica serves them (``/a2a/{id}/assets/{path}``) and a CHARX
export gives them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, LargeBinary, String, Table, bindparam, delete, insert, select
from sqlalchemy.sql.expression import Executable

from persona_agent.db import GroupCommitWriter, metadata
from persona_agent.personas.formats.charx import MAX_ASSET_PATH, CharxAsset

__all__ = ["PersonaAssets", "persona_assets_table"]

persona_assets_table = Table(
    "pa_persona_assets",
    metadata,
    Column("persona_id", String(63), primary_key=True),
    Column("path", String(MAX_ASSET_PATH), primary_key=True),  # in the CHARX it came in
    Column("media_type", String(100), nullable=False),
    Column("data", LargeBinary, nullable=False),
)
"""Each persona's CHARX assets but its icon (:class:`PersonaAssets`)."""

_A = persona_assets_table.c


class PersonaAssets:
    """A persona's CHARX assets, in the hub's database."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer
        self._forget = delete(persona_assets_table).where(_A.persona_id == bindparam("p"))
        self._add = insert(persona_assets_table).values(
            persona_id=bindparam("p"),
            path=bindparam("path"),
            media_type=bindparam("media_type"),
            data=bindparam("data"),
        )

    async def replace(self, persona_id: str, assets: Sequence[CharxAsset]) -> None:
        """The persona's assets become ``assets`` (none: it has none)."""
        rows = [
            {"p": persona_id, "path": a.path, "media_type": a.media_type, "data": a.data}
            for a in assets
        ]
        steps: list[tuple[Executable, Sequence[dict[str, Any]]]] = [
            (self._forget, [{"p": persona_id}])
        ]
        if rows:
            steps.append((self._add, rows))
        await self._db.write_together(steps)

    async def of(self, persona_id: str) -> list[CharxAsset]:
        """The persona's assets, by path."""
        rows = await self._db.fetch(
            select(_A.path, _A.media_type, _A.data)
            .where(_A.persona_id == bindparam("p"))
            .order_by(_A.path),
            {"p": persona_id},
        )
        return [CharxAsset(str(path), str(kind), bytes(data)) for path, kind, data in rows]

    async def get(self, persona_id: str, path: str) -> CharxAsset | None:
        """The persona's asset at ``path`` (``None``: it has none there)."""
        rows = await self._db.fetch(
            select(_A.media_type, _A.data).where(
                _A.persona_id == bindparam("p"), _A.path == bindparam("path")
            ),
            {"p": persona_id, "path": path},
        )
        return CharxAsset(path, str(rows[0][0]), bytes(rows[0][1])) if rows else None

    async def forget_persona(self, persona_id: str) -> None:
        """Delete the persona's assets (it was deleted)."""
        await self._db.write(self._forget, [{"p": persona_id}])
