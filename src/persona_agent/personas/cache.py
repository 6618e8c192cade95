"""Validated personas kept between runs, so a restart neither parses nor validates them again.

Loading a persona file is parsing (ryaml, or PyYAML: see the loader) and
validating (pydantic, the hub's own checks, the content hash): about 0.1 ms a
file on two cores, 1 s for 10,000 personas. This cache
keeps every persona that loaded without error, keyed by its file's name, size,
modification time and inode, the way Python keeps bytecode next to sources: a
file whose metadata differs is loaded again. The whole cache is further keyed
by the code that turned files into personas (the model and loader sources, the
pydantic-core, PyYAML and ryaml versions): when any of it changes, every file is
loaded again, so a persona that newer rules would refuse cannot come back from
the cache.

The cache is one pickle file in the data directory (unpickling 10,000
personas takes a third of the time that validating them does). It is read
with an unpickler that builds the persona model's classes and plain
containers, nothing else: a foreign or corrupt file cannot run code and is
ignored. Like the database beside it, the file must be writable by the hub
alone. A cache that cannot be read or written is ignored (logged at DEBUG): it
is never needed for correctness.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import io
import logging
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from persona_agent.personas import model
from persona_agent.personas.model import Persona

__all__ = ["PersonaCache", "code_fingerprint"]

logger = logging.getLogger(__name__)

_FORMAT = "persona-cache/2"

Key = tuple[int, int, int]
"""A file's size, modification time (ns) and inode."""


def _key(stat: os.stat_result) -> Key:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


@functools.cache
def code_fingerprint() -> str:
    """A hash of what decides how a file becomes a persona: if it changes, so does this."""
    from persona_agent.personas import loader  # here: the loader imports this module

    digest = hashlib.sha256(_FORMAT.encode())
    for module in (model, loader):
        digest.update(Path(module.__file__ or "").read_bytes())
    for package in ("pydantic-core", "PyYAML", "ryaml"):
        digest.update(f"\0{package}={importlib.metadata.version(package)}".encode())
    return digest.hexdigest()


class _ModelUnpickler(pickle.Unpickler):
    """Builds the persona model's classes and nothing else (no function, no other class)."""

    def find_class(self, module_name: str, name: str) -> Any:
        if module_name == model.__name__:
            found = getattr(model, name, None)
            if isinstance(found, type) and issubclass(found, BaseModel):
                return found
        raise pickle.UnpicklingError(f"{module_name}.{name} is not a persona model class")


class PersonaCache:
    """File name -> validated persona, valid while the file's (size, mtime, inode) and
    the loading code are unchanged.

    :meth:`get` and :meth:`put` during one load; :meth:`save` then writes the
    entries of this load only (files gone since are forgotten).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._old: dict[str, tuple[Key, Persona]] | None = None
        self._new: dict[str, tuple[Key, Persona]] = {}
        self._changed = False

    def _entries(self) -> dict[str, tuple[Key, Persona]]:
        """The saved entries, read at the first call (inside the load, not before it)."""
        if self._old is None:
            self._old = self._read()
        return self._old

    def _read(self) -> dict[str, tuple[Key, Persona]]:
        try:
            content = _ModelUnpickler(io.BytesIO(self.path.read_bytes())).load()
        except FileNotFoundError:
            return {}
        except Exception as error:  # any unreadable cache is no cache
            logger.debug("Persona cache %s not used: %s", self.path, error)
            return {}
        if (
            isinstance(content, dict)
            and content.get("format") == _FORMAT
            and content.get("code") == code_fingerprint()
            and isinstance(content.get("entries"), dict)
        ):
            entries: dict[str, tuple[Key, Persona]] = content["entries"]
            return entries
        logger.debug("Persona cache %s not used: another format or other code", self.path)
        return {}

    def get(self, name: str, stat: os.stat_result) -> Persona | None:
        """The persona file ``name`` loaded to, if the file is as it was then."""
        entry = self._entries().get(name)
        if not (
            isinstance(entry, tuple)
            and len(entry) == 2
            and entry[0] == _key(stat)
            and isinstance(entry[1], Persona)
        ):
            return None
        self._new[name] = entry
        return entry[1]

    def put(self, name: str, stat: os.stat_result, persona: Persona) -> None:
        """Remember the persona loaded from ``name`` (``stat``: its metadata before it was read)."""
        self._new[name] = (_key(stat), persona)
        self._changed = True

    def save(self) -> None:
        """Write this load's entries, if anything changed; errors are logged, not raised."""
        if not self._changed and self._new.keys() == self._entries().keys():
            return
        content = {"format": _FORMAT, "code": code_fingerprint(), "entries": self._new}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".personas.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "wb") as file:
                    pickle.dump(content, file, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except (OSError, pickle.PicklingError) as error:
            logger.debug("Persona cache %s not written: %s", self.path, error)
