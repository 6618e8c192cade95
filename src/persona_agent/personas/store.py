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
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from persona_agent.errors import (
    PersonaExistsError,
    PersonaFileError,
    PersonaNotFoundError,
    PreconditionFailedError,
)
from persona_agent.personas.formats.png import CleanImage, ImageError, clean_image
from persona_agent.personas.loader import (
    PERSONA_SUFFIXES,
    NoCardError,
    dump_persona_yaml,
    load_persona_file,
)
from persona_agent.personas.model import Persona, is_valid_persona_id
from persona_agent.personas.scan import load_persona_dir, remove_temporary_files
from persona_agent.security.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "AVATAR_SUFFIX",
    "FilePersonaStore",
    "HeldPersonaStore",
    "PersonaChange",
    "PersonaStore",
    "version_matches",
]

logger = logging.getLogger(__name__)

_NEW_FILE_MODE = 0o644
_IMAGE_CACHE_SIZE = 64
"""Avatars kept re-encoded in memory (least recently served are dropped)."""

AVATAR_SUFFIX = ".avatar.png"
"""The store writes a persona's avatar image to ``{id}.avatar.png``."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class PersonaChange:
    """A persona was created or replaced (``upsert``, with the new persona) or
    deleted (``delete``, ``persona`` is ``None``)."""

    kind: Literal["upsert", "delete"]
    persona_id: str
    persona: Persona | None


class PersonaStore(ABC):
    """Where personas live. Subscribers hear of every successful change.

    The hub uses a store through this interface only (the REST API, the registry's
    subscription, start-up), so a store in a database can stand in for the files.
    Implementations call ``super().__init__()`` and :meth:`_notify` after each change.
    """

    def __init__(self) -> None:
        self._subscribers: builtins.list[Callable[[PersonaChange], None]] = []

    @abstractmethod
    def load(self) -> builtins.list[PersonaFileError]:
        """Read every persona into memory, once, at start-up; one error per persona that
        could not be read (those are not served). Subscribers are not notified."""

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
    async def put(self, persona: Persona, *, image: CleanImage | None = None) -> Persona:
        """Create or replace the persona with ``persona.id``, then notify subscribers; the
        persona as stored. With ``image``, that becomes its avatar.

        Raises:
            PersonaFileError: its ``avatar`` names no image the store has.
        """

    @abstractmethod
    async def create(self, persona: Persona, *, image: CleanImage | None = None) -> Persona:
        """Create a persona whose id is new, then notify subscribers; the persona as stored.

        Raises:
            PersonaExistsError: a persona has this id already.
            PersonaFileError: its ``avatar`` names no image the store has.
        """

    @abstractmethod
    async def replace(
        self, persona: Persona, *, if_match: str | None = None, image: CleanImage | None = None
    ) -> Persona:
        """Replace an existing persona, then notify subscribers; the persona as stored.

        Raises:
            PersonaNotFoundError: no persona has this id.
            PreconditionFailedError: ``if_match`` is neither ``*`` nor the current version.
            PersonaFileError: its ``avatar`` names no image the store has.
        """

    @abstractmethod
    async def avatar(self, persona_id: str) -> CleanImage | None:
        """The persona's avatar as PNG without text chunks, or ``None`` if it has none.

        Raises:
            PersonaNotFoundError: no persona has this id.
        """

    @abstractmethod
    async def delete(self, persona_id: str, *, if_match: str | None = None) -> None:
        """Delete the persona with this id, then notify subscribers.

        Raises:
            PersonaNotFoundError: no persona has this id.
            PreconditionFailedError: ``if_match`` is neither ``*`` nor the current version.
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


def version_matches(if_match: str, version: str) -> bool:
    """Whether an ``If-Match`` value (a list of entity tags, or ``*``) names ``version``."""
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in if_match.split(",")]
    return "*" in tags or version in tags


def _fsync_directory(directory: Path) -> None:
    if os.name != "posix":  # Windows cannot open a directory for fsync
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(target: Path, content: bytes) -> None:
    """Write ``content`` to ``target`` so that readers see the old file or the new one, whole."""
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = _NEW_FILE_MODE
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


class HeldPersonaStore(PersonaStore):
    """A store that holds every persona in memory (``_personas``, by id): reads never wait
    for files or a database. Both stores are one."""

    def __init__(self) -> None:
        super().__init__()
        self._personas: dict[str, Persona] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._changes: set[asyncio.Future[Any]] = set()

    async def list(self) -> builtins.list[Persona]:
        return [self._personas[key] for key in sorted(self._personas)]

    async def get(self, persona_id: str) -> Persona:
        try:
            return self._personas[persona_id]
        except KeyError:
            raise _not_found(persona_id) from None

    async def _complete(self, change: Coroutine[Any, Any, _T]) -> _T:
        """Run ``change`` to the end even if the caller is cancelled meanwhile, so that
        the stored copy (file or row), memory and notification never part."""
        task = asyncio.ensure_future(change)
        self._changes.add(task)  # a strong reference while it runs
        task.add_done_callback(self._changes.discard)
        return await asyncio.shield(task)

    def _lock(self, persona_id: str) -> asyncio.Lock:
        """The lock that serializes the changes to one id."""
        return self._locks.setdefault(persona_id, asyncio.Lock())


class FilePersonaStore(HeldPersonaStore):
    """One persona file per persona in a directory, held in memory.

    :meth:`load` reads the directory; after that, reads come from memory and
    :meth:`put` / :meth:`delete` write through to the files. ``put`` writes
    ``{id}.yaml`` atomically (temporary file in the same directory, fsync,
    rename) and removes any ``{id}.yml``, ``{id}.json`` or ``{id}.png``; an avatar
    given with it (a PNG card's image) is written to ``{id}.avatar.png``. Changes to one id are
    serialized, and a change whose caller is cancelled still completes (file,
    memory and notification stay together). Changes made to the files by others
    are taken in by :meth:`sync_file` (the directory watcher calls it).
    """

    def __init__(self, directory: Path, *, limits: Limits = DEFAULT_LIMITS) -> None:
        """``limits``: how large a persona file may be (checked before it is parsed)."""
        super().__init__()
        self.directory = directory
        self.limits = limits
        self.errors: builtins.list[PersonaFileError] = []
        """The bad files of the last :meth:`load`, less those a put or delete replaced."""
        self._images: OrderedDict[tuple[str, int, int], CleanImage] = OrderedDict()

    def load(self) -> builtins.list[PersonaFileError]:
        """Read every persona file of the directory into memory, after removing what
        interrupted writes left behind; the errors of bad files.

        Subscribers are not notified. Raises ``OSError`` if the directory cannot be listed.
        """
        remove_temporary_files(self.directory)
        self._personas, self.errors = load_persona_dir(self.directory, self.limits)
        return builtins.list(self.errors)

    async def put(self, persona: Persona, *, image: CleanImage | None = None) -> Persona:
        """Write the persona's file (create or replace), then notify subscribers.

        Raises:
            ValueError: the persona's id is not a valid persona id.
            PersonaFileError: its ``avatar`` is no file of the directory.
            OSError: the file could not be written (the store is unchanged).
        """
        return await self._complete(self._put(persona, image, None))

    async def create(self, persona: Persona, *, image: CleanImage | None = None) -> Persona:
        return await self._complete(self._put(persona, image, "absent"))

    async def replace(
        self, persona: Persona, *, if_match: str | None = None, image: CleanImage | None = None
    ) -> Persona:
        return await self._complete(self._put(persona, image, if_match or "*"))

    async def avatar(self, persona_id: str) -> CleanImage | None:
        persona = await self.get(persona_id)
        if persona.avatar is None:
            return None
        path = self.directory / persona.avatar
        try:
            status = path.stat()
        except OSError:
            return None
        key = (str(path), status.st_mtime_ns, status.st_size)
        cached = self._images.get(key)
        if cached is not None:
            self._images.move_to_end(key)
            return cached
        if status.st_size > self.limits.max_image_bytes:
            logger.warning("Avatar %s is larger than the image limit; not served", path)
            return None
        try:
            image = await asyncio.to_thread(lambda: clean_image(path.read_bytes()))
        except (OSError, ImageError) as error:
            logger.warning("Avatar %s cannot be served: %s", path, error)
            return None
        self._images[key] = image
        if len(self._images) > _IMAGE_CACHE_SIZE:
            self._images.popitem(last=False)
        return image

    def _check(self, persona_id: str, expect: str | None) -> None:
        """``expect``: None (anything), "absent", or an If-Match value (must exist and match)."""
        current = self._personas.get(persona_id)
        if expect is None:
            return
        if expect == "absent":
            if current is not None:
                raise PersonaExistsError(f"A persona with id '{persona_id}' already exists")
            return
        if current is None:
            raise _not_found(persona_id)
        if not version_matches(expect, current.version):
            raise PreconditionFailedError(
                f"Persona '{persona_id}' is at version {current.version}, not {expect}"
            )

    async def _put(self, persona: Persona, image: CleanImage | None, expect: str | None) -> Persona:
        if not is_valid_persona_id(persona.id):  # a model_construct()ed persona
            raise ValueError(f"'{persona.id}' is not a valid persona id")
        async with self._lock(persona.id):
            self._check(persona.id, expect)
            persona, image = await asyncio.to_thread(self._own_avatar, persona, image)
            text = dump_persona_yaml(persona)
            await asyncio.to_thread(self._write, persona.id, text, image)
            self._personas[persona.id] = persona
            self._forget_errors(persona.id)
            self._notify(PersonaChange("upsert", persona.id, persona))
            return persona

    def _own_avatar(
        self, persona: Persona, image: CleanImage | None
    ) -> tuple[Persona, CleanImage | None]:
        """The persona and the image to write beside it: a given image, or the picture of
        a PNG card about to be replaced by the YAML file, becomes ``{id}.avatar.png``."""
        own = f"{persona.id}{AVATAR_SUFFIX}"
        if image is None and persona.avatar == f"{persona.id}.png":
            try:
                image = clean_image((self.directory / persona.avatar).read_bytes())
            except (OSError, ImageError):
                image = None
        if image is not None:
            return persona.model_copy(update={"avatar": own}), image
        if persona.avatar is not None and not (self.directory / persona.avatar).is_file():
            problem = f"avatar: no file '{persona.avatar}' in the persona directory"
            raise PersonaFileError(persona.id, [problem])
        return persona, None

    async def delete(self, persona_id: str, *, if_match: str | None = None) -> None:
        """Remove the persona's file, then notify subscribers.

        Raises:
            PersonaNotFoundError: no persona has this id.
            PreconditionFailedError: ``if_match`` does not name the current version.
            OSError: the file could not be removed.
        """
        await self._complete(self._delete(persona_id, if_match or "*"))

    async def _delete(self, persona_id: str, if_match: str) -> None:
        async with self._lock(persona_id):
            self._check(persona_id, if_match)
            await asyncio.to_thread(self._remove, persona_id)
            del self._personas[persona_id]
            self._forget_errors(persona_id)
            self._notify(PersonaChange("delete", persona_id, None))

    async def sync_file(self, path: Path) -> None:
        """Bring one persona up to date with its file on disk, as a watcher saw it change.

        A valid file that differs from memory replaces the persona; a file that fails
        validation is logged and recorded in :attr:`errors`, and the running persona
        stays as it was; when no file of the id is left, the persona is removed.
        Subscribers hear of each real change; a file equal to memory (as after our
        own write) changes nothing.
        """
        persona_id = path.stem
        if not is_valid_persona_id(persona_id) or path.suffix.lower() not in PERSONA_SUFFIXES:
            return
        async with self._lock(persona_id):
            existing = [p for p in self._paths(persona_id) if p.is_file()]
            if not existing:
                if self._personas.pop(persona_id, None) is not None:
                    logger.info("Persona '%s' removed (its file is gone)", persona_id)
                    self._forget_errors(persona_id)
                    self._notify(PersonaChange("delete", persona_id, None))
                return
            try:
                persona = await asyncio.to_thread(load_persona_file, existing[0], self.limits)
            except NoCardError:
                return  # an image, not a card
            except PersonaFileError as error:
                logger.error("Persona file rejected, '%s' left as it was: %s", persona_id, error)
                self._forget_errors(persona_id)
                self.errors.append(error)
                return
            self._forget_errors(persona_id)
            current = self._personas.get(persona_id)
            if current is not None and current.version == persona.version:
                return
            self._personas[persona_id] = persona
            logger.info(
                "Persona '%s' %s from its file", persona_id, "updated" if current else "added"
            )
            self._notify(PersonaChange("upsert", persona_id, persona))

    def _paths(self, persona_id: str) -> builtins.list[Path]:
        return [self.directory / f"{persona_id}{suffix}" for suffix in PERSONA_SUFFIXES]

    def _write(self, persona_id: str, text: str, image: CleanImage | None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if image is not None:
            _write_atomically(self.directory / f"{persona_id}{AVATAR_SUFFIX}", image.data)
        target = self.directory / f"{persona_id}.yaml"
        _write_atomically(target, text.encode("utf-8"))
        for path in self._paths(persona_id):
            if path != target:
                path.unlink(missing_ok=True)
        _fsync_directory(self.directory)

    def _remove(self, persona_id: str) -> None:
        for path in self._paths(persona_id):
            path.unlink(missing_ok=True)
        (self.directory / f"{persona_id}{AVATAR_SUFFIX}").unlink(missing_ok=True)
        _fsync_directory(self.directory)

    def _forget_errors(self, persona_id: str) -> None:
        stale = {str(path) for path in self._paths(persona_id)}
        self.errors = [error for error in self.errors if error.path not in stale]
