"""``FilePersonaStore``: personas kept as files in a directory (the embedded default),
beside an optional directory of read-only examples."""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import stat
import tempfile
from collections import OrderedDict
from pathlib import Path

from persona_agent.errors import (
    PersonaExistsError,
    PersonaFileError,
    PreconditionFailedError,
    ReadOnlyPersonaError,
)
from persona_agent.personas.formats.png import CleanImage, ImageError, clean_image
from persona_agent.personas.loader import (
    AVATAR_SUFFIX,
    PERSONA_SUFFIXES,
    NoCardError,
    PersonaSource,
    dump_persona_yaml,
    load_persona_file,
)
from persona_agent.personas.model import Persona, is_valid_persona_id
from persona_agent.personas.scan import load_persona_dir, remove_temporary_files
from persona_agent.personas.stores.store import (
    HeldPersonaStore,
    PersonaChange,
    not_found,
    version_matches,
)
from persona_agent.security.limits import DEFAULT_LIMITS, Limits

__all__ = ["FilePersonaStore"]

logger = logging.getLogger(__name__)

_NEW_FILE_MODE = 0o644
_IMAGE_CACHE_SIZE = 64
"""Avatars kept re-encoded in memory (least recently served are dropped)."""


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


class FilePersonaStore(HeldPersonaStore):
    """One persona file per persona in a directory, held in memory.

    :meth:`load` reads the directory; after that, reads come from memory and
    :meth:`put` / :meth:`delete` write through to the files. ``put`` writes the
    persona's source as given (``{id}.yaml`` or ``{id}.json``, byte for byte), or
    without one ``{id}.yaml`` as the hub writes it, atomically (temporary file in the
    same directory, fsync, rename) and removes the id's other files; an avatar
    given with it (a PNG card's image) is written to ``{id}.avatar.png``.

    With ``examples``, the personas of that directory are listed too, read-only: a
    change to one is written to ``directory`` (where it hides the example), and
    deleting that copy brings the example back. Changes to one id are
    serialized, and a change whose caller is cancelled still completes (file,
    memory and notification stay together). Changes made to the files by others
    are taken in by :meth:`sync_file` (the directory watcher calls it).
    """

    def __init__(
        self, directory: Path, *, examples: Path | None = None, limits: Limits = DEFAULT_LIMITS
    ) -> None:
        """``limits``: how large a persona file may be (checked before it is parsed)."""
        super().__init__()
        self.directory = directory
        self.examples = examples
        self.limits = limits
        self._examples: dict[str, Persona] = {}
        self.errors: builtins.list[PersonaFileError] = []
        """The bad files of the last :meth:`load`, less those a put or delete replaced."""
        self._images: OrderedDict[tuple[str, int, int], CleanImage] = OrderedDict()

    def load(self) -> builtins.list[PersonaFileError]:
        """Read every persona file of the directory into memory, after removing what
        interrupted writes left behind; the errors of bad files.

        Subscribers are not notified. Raises ``OSError`` if the directory cannot be listed
        (a missing directory is created when there are ``examples``).
        """
        errors: builtins.list[PersonaFileError] = []
        if self.examples is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            if self.examples.is_dir():
                self._examples, errors = load_persona_dir(self.examples, self.limits)
        remove_temporary_files(self.directory)
        own, own_errors = load_persona_dir(self.directory, self.limits)
        self._personas = {**self._examples, **own}
        self.errors = errors + own_errors
        return builtins.list(self.errors)

    def home(self, persona_id: str) -> Path:
        """The directory of the persona's file: ``directory``, or ``examples`` for an
        example not changed since (the persona held is the example read at load)."""
        example = self._examples.get(persona_id)
        held = self._personas.get(persona_id)
        if self.examples is not None and example is not None and held is example:
            return self.examples
        return self.directory

    async def source(self, persona_id: str) -> PersonaSource:
        """The persona's YAML or JSON file byte for byte (a PNG card's: the YAML the hub
        would write in its place)."""
        persona = await self.get(persona_id)
        home = self.home(persona_id)
        for suffix, fmt in PERSONA_SUFFIXES.items():
            path = home / f"{persona_id}{suffix}"
            if fmt != "png" and path.is_file():
                try:
                    return PersonaSource(await asyncio.to_thread(path.read_bytes), fmt)
                except OSError:
                    break
        return await super().source(persona.id)

    async def put(
        self,
        persona: Persona,
        *,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        """Write the persona's file (create or replace), then notify subscribers.

        Raises:
            ValueError: the persona's id is not a valid persona id.
            PersonaFileError: its ``avatar`` is no file of the directory.
            OSError: the file could not be written (the store is unchanged).
        """
        return await self._complete(self._put(persona, image, source, None))

    async def create(
        self,
        persona: Persona,
        *,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        return await self._complete(self._put(persona, image, source, "absent"))

    async def replace(
        self,
        persona: Persona,
        *,
        if_match: str | None = None,
        image: CleanImage | None = None,
        source: PersonaSource | None = None,
    ) -> Persona:
        return await self._complete(self._put(persona, image, source, if_match or "*"))

    async def avatar(self, persona_id: str) -> CleanImage | None:
        persona = await self.get(persona_id)
        if persona.avatar is None:
            return None
        path = self.home(persona_id) / persona.avatar
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
            raise not_found(persona_id)
        if not version_matches(expect, current.version):
            raise PreconditionFailedError(
                f"Persona '{persona_id}' is at version {current.version}, not {expect}"
            )

    async def _put(
        self,
        persona: Persona,
        image: CleanImage | None,
        source: PersonaSource | None,
        expect: str | None,
    ) -> Persona:
        if not is_valid_persona_id(persona.id):  # a model_construct()ed persona
            raise ValueError(f"'{persona.id}' is not a valid persona id")
        async with self._lock(persona.id):
            self._check(persona.id, expect)
            named = persona.avatar
            if source is not None and source.fmt == "json" and named is None:
                persona = await asyncio.to_thread(self._card_avatar, persona)
            persona, image = await asyncio.to_thread(self._own_avatar, persona, image)
            if source is None or (source.fmt == "yaml" and persona.avatar != named):
                # No text, or one naming an avatar that is now {id}.avatar.png: written anew.
                source = PersonaSource(dump_persona_yaml(persona).encode("utf-8"), "yaml")
            await asyncio.to_thread(self._write, persona.id, source, image)
            self._personas[persona.id] = persona
            self._forget_errors(persona.id)
            self._notify(PersonaChange("upsert", persona.id, persona))
            return persona

    def _card_avatar(self, persona: Persona) -> Persona:
        """A card (JSON) names no picture: it keeps the ``{id}.avatar.png`` it has."""
        own = self._own(persona.id)
        if (self.home(persona.id) / own).is_file():
            return persona.model_copy(update={"avatar": own})
        return persona

    def _own_avatar(
        self, persona: Persona, image: CleanImage | None
    ) -> tuple[Persona, CleanImage | None]:
        """The persona and the image to write beside it: a given image, or the picture of
        a PNG card about to be replaced by the YAML file, becomes ``{id}.avatar.png``."""
        own = self._own(persona.id)
        home = self.home(persona.id)
        named = persona.avatar
        if image is None and named is not None and home != self.directory:
            try:  # an example's picture, copied with the example's new version
                image = clean_image((home / named).read_bytes())
            except (OSError, ImageError):
                image = None
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
            if self.home(persona_id) != self.directory:
                raise ReadOnlyPersonaError(
                    f"Persona '{persona_id}' is a read-only example (in {self.examples}): "
                    "it can be edited (the copy goes to the user persona directory), "
                    "not deleted"
                )
            await asyncio.to_thread(self._remove, persona_id)
            self._forget_errors(persona_id)
            self._restore_or_forget(persona_id)

    def _restore_or_forget(self, persona_id: str) -> None:
        """The persona's own file is gone: its example comes back, if it has one."""
        example = self._examples.get(persona_id)
        if example is not None:
            self._personas[persona_id] = example
            self._notify(PersonaChange("upsert", persona_id, example))
        elif self._personas.pop(persona_id, None) is not None:
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
                if persona_id in self._personas and self._personas[persona_id] is not (
                    self._examples.get(persona_id)
                ):
                    logger.info("Persona '%s' removed (its file is gone)", persona_id)
                    self._forget_errors(persona_id)
                    self._restore_or_forget(persona_id)
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

    def _own(self, persona_id: str) -> str:
        return f"{persona_id}{AVATAR_SUFFIX}"

    def _write(self, persona_id: str, source: PersonaSource, image: CleanImage | None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if image is not None:
            _write_atomically(self.directory / self._own(persona_id), image.data)
        target = self.directory / f"{persona_id}{source.suffix}"
        _write_atomically(target, source.data)
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
