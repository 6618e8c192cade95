"""Persona stores: where personas live, and who hears of their changes.

``PersonaStore`` is the interface; ``FilePersonaStore`` keeps one YAML file per
persona in a directory (the embedded default).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import stat
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from persona_agent.errors import PersonaFileError, PersonaNotFoundError
from persona_agent.personas.loader import PERSONA_SUFFIXES, dump_persona_yaml, load_persona_dir
from persona_agent.personas.model import Persona, is_valid_persona_id

__all__ = ["FilePersonaStore", "PersonaChange", "PersonaStore"]

logger = logging.getLogger(__name__)

_NEW_FILE_MODE = 0o644


@dataclass(frozen=True, slots=True)
class PersonaChange:
    """A persona was created or replaced (``upsert``, with the new persona) or
    deleted (``delete``, ``persona`` is ``None``)."""

    kind: Literal["upsert", "delete"]
    persona_id: str
    persona: Persona | None


class PersonaStore(ABC):
    """Where personas live. Subscribers hear of every successful change.

    Implementations call ``super().__init__()`` and :meth:`_notify` after each change.
    """

    def __init__(self) -> None:
        self._subscribers: builtins.list[Callable[[PersonaChange], None]] = []

    @abstractmethod
    async def list(self) -> builtins.list[Persona]:
        """Every persona, sorted by id."""

    @abstractmethod
    async def get(self, persona_id: str) -> Persona:
        """The persona with this id.

        Raises:
            PersonaNotFoundError: no persona has this id.
        """

    @abstractmethod
    async def put(self, persona: Persona) -> None:
        """Create or replace the persona with ``persona.id``, then notify subscribers."""

    @abstractmethod
    async def delete(self, persona_id: str) -> None:
        """Delete the persona with this id, then notify subscribers.

        Raises:
            PersonaNotFoundError: no persona has this id.
        """

    def subscribe(self, callback: Callable[[PersonaChange], None]) -> Callable[[], None]:
        """Call ``callback`` after each successful put or delete; returns the unsubscribe.

        Callbacks run synchronously, in subscription order, on the task that made
        the change; one that raises is logged and does not stop the others.
        """
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _notify(self, change: PersonaChange) -> None:
        for callback in builtins.list(self._subscribers):
            try:
                callback(change)
            except Exception:
                logger.exception("persona store subscriber failed on %s", change)


def _not_found(persona_id: str) -> PersonaNotFoundError:
    return PersonaNotFoundError(f"No persona with id '{persona_id}'")


def _fsync_directory(directory: Path) -> None:
    if os.name != "posix":  # Windows cannot open a directory for fsync
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` so that readers see the old file or the new one, whole."""
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = _NEW_FILE_MODE
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class FilePersonaStore(PersonaStore):
    """One persona file per persona in a directory, cached in memory.

    :meth:`load` reads the directory; after that, reads come from memory and
    :meth:`put` / :meth:`delete` write through to the files. ``put`` writes
    ``{id}.yaml`` atomically (temporary file in the same directory, fsync,
    rename) and removes any ``{id}.yml`` or ``{id}.json``. Changes to one id are
    serialized, and a change whose caller is cancelled still completes (file,
    memory and notification stay together). Changes made to the files by others
    are not seen until the next :meth:`load`.
    """

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.errors: builtins.list[PersonaFileError] = []
        """The bad files of the last :meth:`load`, less those a put or delete replaced."""
        self._personas: dict[str, Persona] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._changes: set[asyncio.Future[None]] = set()

    def load(self) -> builtins.list[PersonaFileError]:
        """Read every persona file of the directory into memory; the errors of bad files.

        Subscribers are not notified. Raises ``OSError`` if the directory cannot be listed.
        """
        self._personas, self.errors = load_persona_dir(self.directory)
        return builtins.list(self.errors)

    async def list(self) -> builtins.list[Persona]:
        return [self._personas[key] for key in sorted(self._personas)]

    async def get(self, persona_id: str) -> Persona:
        try:
            return self._personas[persona_id]
        except KeyError:
            raise _not_found(persona_id) from None

    async def put(self, persona: Persona) -> None:
        """Write the persona's file, then notify subscribers.

        Raises:
            ValueError: the persona's id is not a valid persona id.
            OSError: the file could not be written (the store is unchanged).
        """
        if not is_valid_persona_id(persona.id):  # a model_construct()ed persona
            raise ValueError(f"'{persona.id}' is not a valid persona id")
        text = dump_persona_yaml(persona)
        await self._complete(self._put(persona, text))

    async def _put(self, persona: Persona, text: str) -> None:
        async with self._lock(persona.id):
            await asyncio.to_thread(self._write, persona.id, text)
            self._personas[persona.id] = persona
            self._forget_errors(persona.id)
            self._notify(PersonaChange("upsert", persona.id, persona))

    async def delete(self, persona_id: str) -> None:
        """Remove the persona's file, then notify subscribers.

        Raises:
            PersonaNotFoundError: no persona has this id.
            OSError: the file could not be removed.
        """
        await self._complete(self._delete(persona_id))

    async def _delete(self, persona_id: str) -> None:
        async with self._lock(persona_id):
            if persona_id not in self._personas:
                raise _not_found(persona_id)
            await asyncio.to_thread(self._remove, persona_id)
            del self._personas[persona_id]
            self._forget_errors(persona_id)
            self._notify(PersonaChange("delete", persona_id, None))

    async def _complete(self, change: Coroutine[Any, Any, None]) -> None:
        """Run ``change`` to the end even if the caller is cancelled meanwhile, so that
        the file, memory and notification never part."""
        task = asyncio.ensure_future(change)
        self._changes.add(task)  # a strong reference while it runs
        task.add_done_callback(self._changes.discard)
        await asyncio.shield(task)

    def _lock(self, persona_id: str) -> asyncio.Lock:
        return self._locks.setdefault(persona_id, asyncio.Lock())

    def _paths(self, persona_id: str) -> builtins.list[Path]:
        return [self.directory / f"{persona_id}{suffix}" for suffix in PERSONA_SUFFIXES]

    def _write(self, persona_id: str, text: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"{persona_id}.yaml"
        _write_atomically(target, text)
        for path in self._paths(persona_id):
            if path != target:
                path.unlink(missing_ok=True)
        _fsync_directory(self.directory)

    def _remove(self, persona_id: str) -> None:
        for path in self._paths(persona_id):
            path.unlink(missing_ok=True)
        _fsync_directory(self.directory)

    def _forget_errors(self, persona_id: str) -> None:
        stale = {str(path) for path in self._paths(persona_id)}
        self.errors = [error for error in self.errors if error.path not in stale]
