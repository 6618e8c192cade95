"""Loading a persona directory: one sorted scan, each file through the one validating loader."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from stat import S_ISREG

from persona_agent.errors import PersonaFileError
from persona_agent.personas.loader import PERSONA_SUFFIXES, NoCardError, load_persona_file
from persona_agent.personas.model import Persona, is_valid_persona_id
from persona_agent.security.limits import DEFAULT_LIMITS, Limits

__all__ = ["TEMPORARY_FILE", "load_persona_dir", "remove_temporary_files"]

logger = logging.getLogger(__name__)

TEMPORARY_FILE = re.compile(
    r"^\.[a-z0-9][a-z0-9-]{0,62}(\.avatar)?\.(yaml|yml|json|png)(\.[^.]+)?\.tmp$"
)
"""The name of a file written before it is renamed into place (``.{id}.yaml.{random}.tmp``
by the store, ``.{id}.yaml.tmp`` by ``import-persona``): hidden, so no load or watcher
takes it for a persona."""


def load_persona_dir(
    directory: Path, limits: Limits = DEFAULT_LIMITS
) -> tuple[dict[str, Persona], list[PersonaFileError]]:
    """Every persona file directly in ``directory``: the valid personas by id and one
    error per bad file, both in file-name order.

    Hidden files (``.name``) are skipped, and so are images that are not cards: a PNG
    with no card chunk, or whose name is not a persona id (``ada.avatar.png``). A second
    file with the same id (``a.yaml`` and ``a.yml``) is an error, and the first one by
    name wins.

    Raises:
        OSError: the directory cannot be listed.
    """
    with os.scandir(directory) as listing:
        entries = sorted(listing, key=lambda entry: entry.name)
    personas: dict[str, Persona] = {}
    errors: list[PersonaFileError] = []
    first_file: dict[str, str] = {}
    for entry in entries:
        name = entry.name
        stem, suffix = os.path.splitext(name)
        if name.startswith(".") or suffix.lower() not in PERSONA_SUFFIXES:
            continue
        if suffix.lower() == ".png" and not is_valid_persona_id(stem):
            continue  # an image: an avatar, say
        try:
            if not S_ISREG(entry.stat().st_mode):  # follows symbolic links
                continue
        except OSError:
            continue
        result: Persona | PersonaFileError
        try:
            result = load_persona_file(entry.path, limits)
        except NoCardError:
            continue  # an image, not a card
        except PersonaFileError as error:
            result = error
        if stem in first_file:
            problem = f"persona id '{stem}' is already defined by {first_file[stem]}"
            errors.append(PersonaFileError(entry.path, [problem]))
            continue
        first_file[stem] = name
        if isinstance(result, PersonaFileError):
            errors.append(result)
        else:
            personas[result.id] = result
    return personas, errors


def remove_temporary_files(directory: Path) -> list[str]:
    """Remove what interrupted writes left in ``directory`` (see :data:`TEMPORARY_FILE`);
    the names removed. The file each was to replace is still whole: the rename never ran.

    Raises:
        OSError: the directory cannot be listed.
    """
    removed = []
    with os.scandir(directory) as listing:
        for entry in listing:
            if TEMPORARY_FILE.match(entry.name) and entry.is_file(follow_symlinks=False):
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    continue
                removed.append(entry.name)
    for name in sorted(removed):
        logger.warning("Removed %s, left by a persona write that was interrupted", name)
    return sorted(removed)
