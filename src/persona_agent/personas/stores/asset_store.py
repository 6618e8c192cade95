"""Where a persona's CHARX assets are kept (``pa_persona_assets``): the embedded files of
the CHARX it was imported from, besides its icon (the avatar), by their path in the zip.

An import of a persona replaces its assets (none, for a card that is not a CHARX); they go
when the persona is deleted. They are kept in the hub's database whichever store holds the
personas, so that every replica serves them (``/a2a/{id}/assets/{path}``) and a CHARX
export gives them back. The table is defined in :mod:`.asset_table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.personas.formats.charx import CharxAsset

__all__ = ["PersonaAssets"]

_TABLE = "pa_persona_assets"

_FORGET = Sql(f"DELETE FROM {_TABLE} WHERE {_TABLE}.persona_id = :p", table=_TABLE)
_ADD = Sql(
    f"INSERT INTO {_TABLE} (persona_id, path, media_type, data) "
    "VALUES (:p, :path, :media_type, :data)",
    table=_TABLE,
)
_OF = Sql(
    f"SELECT {_TABLE}.path, {_TABLE}.media_type, {_TABLE}.data FROM {_TABLE} "
    f"WHERE {_TABLE}.persona_id = :p ORDER BY {_TABLE}.path",
    table=_TABLE,
)
_GET = Sql(
    f"SELECT {_TABLE}.media_type, {_TABLE}.data FROM {_TABLE} "
    f"WHERE {_TABLE}.persona_id = :p AND {_TABLE}.path = :path",
    table=_TABLE,
)


class PersonaAssets:
    """A persona's CHARX assets, in the hub's database."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer

    async def replace(self, persona_id: str, assets: Sequence[CharxAsset]) -> None:
        """The persona's assets become ``assets`` (none: it has none)."""
        rows = [
            {"p": persona_id, "path": a.path, "media_type": a.media_type, "data": a.data}
            for a in assets
        ]
        steps: list[tuple[Sql, Sequence[dict[str, Any]]]] = [(_FORGET, [{"p": persona_id}])]
        if rows:
            steps.append((_ADD, rows))
        await self._db.write_together(steps)

    async def of(self, persona_id: str) -> list[CharxAsset]:
        """The persona's assets, by path."""
        rows = await self._db.fetch(_OF, {"p": persona_id})
        return [CharxAsset(str(path), str(kind), bytes(data)) for path, kind, data in rows]

    async def get(self, persona_id: str, path: str) -> CharxAsset | None:
        """The persona's asset at ``path`` (``None``: it has none there)."""
        rows = await self._db.fetch(_GET, {"p": persona_id, "path": path})
        return CharxAsset(path, str(rows[0][0]), bytes(rows[0][1])) if rows else None

    async def forget_persona(self, persona_id: str) -> None:
        """Delete the persona's assets (it was deleted)."""
        await self._db.write(_FORGET, [{"p": persona_id}])
