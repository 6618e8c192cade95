"""The persona store and its limits, built from the settings: on a replica the database's
personas; on a single hub the persona directory's files (and the examples beside them),
loaded, any bad file stopping start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from persona_agent.db import Database
from persona_agent.errors import ConfigError
from persona_agent.personas.stores.file_store import FilePersonaStore
from persona_agent.personas.stores.store import PersonaStore
from persona_agent.security.limits import Limits
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from persona_agent.personas.stores.sql_store import SqlPersonaStore

__all__ = [
    "PersonaStorePart",
    "build_persona_store",
    "load_personas",
    "open_persona_store",
    "persona_limits",
]


@dataclass(frozen=True)
class PersonaStorePart:
    """The hub's persona store, and the limits every persona file or body is held to."""

    store: PersonaStore
    sql: SqlPersonaStore | None
    """The same store when it is the database's (a replica's): closed with the storage,
    and given the persona directory's files when the replica joins the cluster."""
    limits: Limits
    """Built once: for the store, the REST API and the body limit."""


def build_persona_store(settings: Settings, db: Database, *, replica: bool) -> PersonaStorePart:
    """The persona store of the settings and its limits (:func:`persona_limits`): on a
    ``replica``, the personas in the database ``db`` (filled from the persona directory
    when the replica joins the cluster); else the persona directory's, loaded
    (:func:`load_personas`).

    Raises:
        ConfigError: as :func:`load_personas`.
    """
    limits = persona_limits(settings)
    if replica:
        # Imported only then: the SQL store is a replica's.
        from persona_agent.personas.stores.sql_store import SqlPersonaStore

        sql = SqlPersonaStore(db.engine, limits=limits)
        return PersonaStorePart(sql, sql, limits)
    return PersonaStorePart(load_personas(settings, limits), None, limits)


def open_persona_store(settings: Settings, limits: Limits) -> PersonaStore:
    """The store of the settings' personas, not loaded yet (``load()`` reads them): the
    files of the writable persona directory, and the read-only examples beside them, each
    held to ``limits`` (:func:`persona_limits`, built once for the hub).

    Raises:
        ConfigError: a persona directory set explicitly does not exist.
    """
    directory = settings.writable_personas_dir
    examples = settings.example_personas_dir
    if examples is None and not directory.is_dir():
        raise ConfigError(f"Persona directory {directory} does not exist")
    return FilePersonaStore(directory, examples=examples, limits=limits)


def persona_limits(settings: Settings) -> Limits:
    """How large a persona file or body may be, as the settings say."""
    return Limits(
        max_bytes=settings.max_persona_bytes,
        max_depth=settings.max_persona_depth,
        max_image_bytes=settings.max_image_bytes,
        max_lore_entries=settings.max_lore_entries,
    )


def load_personas(settings: Settings, limits: Limits) -> PersonaStore:
    """The settings' persona store (:func:`open_persona_store`), loaded; any bad file stops
    start-up with every problem named."""
    store = open_persona_store(settings, limits)
    try:
        errors = store.load()
    except OSError as error:
        raise ConfigError(
            f"Persona directory {settings.personas_dir} cannot be read: {error}"
        ) from None
    if errors:
        raise ConfigError(
            f"{len(errors)} invalid persona file(s):\n" + "\n".join(f"  {e}" for e in errors)
        )
    return store
