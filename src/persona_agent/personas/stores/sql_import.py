"""A persona directory imported into the persona table: each file's persona with its cleaned
avatar and source hash, and the statement that writes those that changed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.dml import ReturningInsert

from persona_agent.errors import PersonaFileError
from persona_agent.personas.formats.png import ImageError, clean_image
from persona_agent.personas.loader import dump_persona_yaml
from persona_agent.personas.model import Persona
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.stores.sql_writes import personas_table
from persona_agent.personas.stores.store import AVATAR_SUFFIX
from persona_agent.security.limits import Limits, image_too_large

__all__ = ["Imported", "import_statement", "read_directory"]

_t = personas_table.c


@dataclass(frozen=True, slots=True)
class Imported:
    """A persona to import, its avatar (cleaned) and the hash of what it was read from."""

    persona: Persona
    image: bytes | None
    source_hash: str


def read_directory(
    directory: Path, limits: Limits
) -> tuple[list[Imported], list[PersonaFileError]]:
    """In a thread: the directory's personas with their avatars, and its errors."""
    personas, errors = load_persona_dir(directory, limits)
    imported = []
    for persona in personas.values():
        try:
            imported.append(_with_avatar(directory, persona, limits))
        except PersonaFileError as error:
            errors.append(error)
    return imported, errors


def _with_avatar(directory: Path, persona: Persona, limits: Limits) -> Imported:
    digest = hashlib.sha256(persona.version.encode("ascii"))
    if persona.avatar is None:
        return Imported(persona, None, digest.hexdigest())
    path = directory / persona.avatar
    limit = limits.max_image_bytes
    try:
        with path.open("rb") as file:
            raw = file.read(limit + 1)  # the file may grow meanwhile
        if len(raw) > limit:
            raise ImageError(str(image_too_large(len(raw), limits)))
        image = clean_image(raw)
    except OSError as error:
        problem = f"avatar of '{persona.id}': cannot read the file: {error.strerror}"
        raise PersonaFileError(str(path), [problem]) from None
    except ImageError as error:
        raise PersonaFileError(str(path), [f"avatar of '{persona.id}': {error}"]) from None
    digest.update(b"\0" + raw)
    own = persona.model_copy(update={"avatar": f"{persona.id}{AVATAR_SUFFIX}"})
    return Imported(own, image.data, digest.hexdigest())


def import_statement(batch: list[Imported]) -> ReturningInsert[Any]:
    """Insert each persona, or replace a row whose ``source_hash`` differs (imported
    from other content, or never imported: NULL); the ids of the rows written."""
    insert = pg_insert(personas_table).values(
        [
            {
                "id": item.persona.id,
                "version": item.persona.version,
                "document": dump_persona_yaml(item.persona),
                "image": item.image,
                "source_hash": item.source_hash,
            }
            for item in batch
        ]
    )
    excluded = insert.excluded
    return insert.on_conflict_do_update(
        index_elements=[_t.id],
        set_={
            "version": excluded.version,
            "document": excluded.document,
            "image": excluded.image,
            "source_hash": excluded.source_hash,
            "updated_at": func.now(),
        },
        where=_t.source_hash.is_distinct_from(excluded.source_hash),
    ).returning(_t.id)
