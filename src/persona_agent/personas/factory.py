"""The persona store the settings ask for."""

from __future__ import annotations

from persona_agent.errors import ConfigError
from persona_agent.personas.parsing import Limits
from persona_agent.personas.store import FilePersonaStore, PersonaStore
from persona_agent.settings import Settings

__all__ = ["open_persona_store", "persona_limits"]


def open_persona_store(settings: Settings) -> PersonaStore:
    """The store of the settings' personas, not loaded yet (``load()`` reads them): the
    files of the persona directory.

    Raises:
        ConfigError: the persona directory does not exist.
    """
    directory = settings.personas_dir
    if not directory.is_dir():
        raise ConfigError(f"Persona directory {directory} does not exist")
    return FilePersonaStore(directory, limits=persona_limits(settings))


def persona_limits(settings: Settings) -> Limits:
    """How large a persona file or body may be, as the settings say."""
    return Limits(max_bytes=settings.max_persona_bytes, max_depth=settings.max_persona_depth)
