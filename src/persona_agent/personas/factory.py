"""The persona store the settings ask for, its load begun."""

from __future__ import annotations

import hashlib

from persona_agent.errors import ConfigError
from persona_agent.personas.store import FilePersonaStore
from persona_agent.settings import Settings

__all__ = ["open_persona_store"]


def open_persona_store(settings: Settings) -> FilePersonaStore:
    """The file store of the persona directory, its cache in the data directory, and its
    load started (``FilePersonaStore.start_loading``): ``load()`` finishes it.

    Light to import: ``serve`` calls it before it imports the server, so that a helper
    process parses persona files during those imports.

    Raises:
        ConfigError: the persona directory does not exist or cannot be listed.
    """
    directory = settings.personas_dir
    if not directory.is_dir():
        raise ConfigError(f"Persona directory {directory} does not exist")
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    cache = settings.data_dir / "cache" / f"personas-{digest}.pickle"
    store = FilePersonaStore(directory, cache=cache)
    try:
        store.start_loading()
    except OSError as error:
        raise ConfigError(f"Persona directory {directory} cannot be read: {error}") from error
    return store
