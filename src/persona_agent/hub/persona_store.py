"""The persona store and its limits, built from the settings: the persona directory's files
(and the examples beside them), loaded; any bad file stops start-up."""

from __future__ import annotations

from persona_agent.errors import ConfigError
from persona_agent.personas.stores.file_store import FilePersonaStore
from persona_agent.personas.stores.store import PersonaStore
from persona_agent.security.limits import Limits
from persona_agent.settings import Settings

__all__ = ["load_personas", "open_persona_store", "persona_limits"]


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
