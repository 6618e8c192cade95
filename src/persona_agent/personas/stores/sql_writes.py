"""The persona table (replicas: PostgreSQL) and its writes by compare-and-swap: the
statement of one, and why one wrote nothing."""

from __future__ import annotations

from enum import Enum
from typing import Any, NoReturn

from sqlalchemy import Column, DateTime, LargeBinary, String, Table, Text, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import ReturningInsert, ReturningUpdate

from persona_agent.db import metadata
from persona_agent.errors import PersonaNotFoundError, PreconditionFailedError

__all__ = ["Expect", "entity_tags", "personas_table", "refuse", "write_statement"]

personas_table = Table(
    "pa_personas",
    metadata,
    Column("id", String(63), primary_key=True),
    Column("version", String(64), nullable=False),  # the persona's content version (its ETag)
    Column("document", Text, nullable=False),  # the persona as YAML
    Column("image", LargeBinary, nullable=True),  # its avatar, PNG without text chunks
    Column("source_hash", String(64), nullable=True),  # the file it was imported from
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""The personas (:class:`persona_agent.personas.stores.sql_store.SqlPersonaStore`)."""

_t = personas_table.c


class Expect(Enum):
    ABSENT = "absent"
    """What :meth:`SqlPersonaStore.create` expects: no row of the id."""


def _not_found(persona_id: str) -> PersonaNotFoundError:
    return PersonaNotFoundError(f"No persona with id '{persona_id}'")


def entity_tags(if_match: str) -> list[str] | None:
    """The versions an ``If-Match`` value names (as ``version_matches`` reads it);
    ``None`` for ``*``."""
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in if_match.split(",")]
    return None if "*" in tags else tags


def write_statement(
    persona_id: str, version: str, document: str, image: bytes | None, expect: str | Expect | None
) -> ReturningInsert[Any] | ReturningUpdate[Any]:
    """The write of a row, returning ``has_image`` and ``updated_at``, or no row when
    ``expect`` is not met. ``image=None`` keeps the row's image."""
    values: dict[str, Any] = {"version": version, "document": document, "updated_at": func.now()}
    if image is not None:
        values["image"] = image
    returning = (_t.image.is_not(None).label("has_image"), _t.updated_at)
    if expect is None or expect is Expect.ABSENT:
        insert = pg_insert(personas_table).values(id=persona_id, **values)
        if expect is Expect.ABSENT:
            return insert.on_conflict_do_nothing(index_elements=[_t.id]).returning(*returning)
        changes = {name: insert.excluded[name] for name in values}
        return insert.on_conflict_do_update(index_elements=[_t.id], set_=changes).returning(
            *returning
        )
    statement = update(personas_table).where(_t.id == persona_id).values(**values)
    tags = entity_tags(expect)
    if tags is not None:
        statement = statement.where(_t.version.in_(tags))
    return statement.returning(*returning)


async def refuse(conn: AsyncConnection, persona_id: str, if_match: str) -> NoReturn:
    """Why a compare-and-swap wrote nothing: the row is absent, or at another version."""
    current = (
        await conn.execute(select(_t.version).where(_t.id == persona_id))
    ).scalar_one_or_none()
    if current is None:
        raise _not_found(persona_id)
    raise PreconditionFailedError(f"Persona '{persona_id}' is at version {current}, not {if_match}")
