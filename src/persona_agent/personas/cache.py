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
personas takes a third of the time that validating them does), with the keys
apart from the personas: which files must be parsed is known from the keys
alone, before the personas are unpickled (``serve`` starts parsing the changed
files before it imports the server, and unpickles the rest after). It is read
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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from persona_agent.personas import model
from persona_agent.personas.forks import call_in_child
from persona_agent.personas.model import Persona

if sys.platform != "win32":
    import fcntl

__all__ = ["Key", "PersonaCache", "code_fingerprint", "file_key"]

logger = logging.getLogger(__name__)

_LOCK_WAIT = 10.0
"""At most this long (s), a load waits for a cache being written before it reads the old one."""

_FORMAT = "persona-cache/3"

Key = tuple[int, int, int]
"""A file's size, modification time (ns) and inode."""


def file_key(stat: os.stat_result) -> Key:
    """The key of a file's cache entry: its size, modification time (ns) and inode."""
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


def _unpickle(data: bytes) -> Any:
    return _ModelUnpickler(io.BytesIO(data)).load()


class PersonaCache:
    """File name -> validated persona, valid while the file's (size, mtime, inode) and
    the loading code are unchanged.

    During one load: :meth:`fresh` for each file, :meth:`get` for the fresh ones,
    :meth:`put` for the others once loaded; then :meth:`save` writes the entries of
    this load only (files gone since are forgotten). The file holds the keys apart
    from the personas, so :meth:`fresh` reads only the keys: the personas are
    unpickled at the first :meth:`get`.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._keys: dict[str, Key] | None = None
        self._pickled: bytes = b""
        self._personas: dict[str, Persona] | None = None
        self._new_keys: dict[str, Key] = {}
        self._new: dict[str, Persona] = {}
        self._changed = False

    def _saved_keys(self) -> dict[str, Key]:
        """The saved keys, read at the first call (inside the load, not before it)."""
        if self._keys is None:
            self._keys = self._read()
        return self._keys

    def _lock_file(self) -> int | None:
        """The cache's lock file, open; None where there are no locks or it cannot be opened."""
        if sys.platform == "win32":
            return None
        try:
            return os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None

    def _read_file(self) -> bytes:
        """The cache file, once a write under way (a detached :meth:`save`) has ended.

        The file is replaced whole, so it can always be read; the lock only makes a
        load that starts while the last one's cache is being written wait for it (at
        most ``_LOCK_WAIT``) rather than find the older one.
        """
        lock = self._lock_file()
        if lock is None or sys.platform == "win32":
            return self.path.read_bytes()
        try:
            deadline = time.monotonic() + _LOCK_WAIT
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.005)
            return self.path.read_bytes()
        finally:
            os.close(lock)

    def _read(self) -> dict[str, Key]:
        try:
            content = _unpickle(self._read_file())
        except FileNotFoundError:
            return {}
        except Exception as error:  # any unreadable cache is no cache
            logger.debug("Persona cache %s not used: %s", self.path, error)
            return {}
        if (
            isinstance(content, dict)
            and content.get("format") == _FORMAT
            and content.get("code") == code_fingerprint()
            and isinstance(content.get("keys"), dict)
            and isinstance(content.get("personas"), bytes)
        ):
            self._pickled = content["personas"]
            keys: dict[str, Key] = content["keys"]
            return keys
        logger.debug("Persona cache %s not used: another format or other code", self.path)
        return {}

    def fresh(self, name: str, key: Key) -> bool:
        """Whether the cache holds the persona of file ``name`` as the file is now
        (``key``: :func:`file_key` of the file's metadata)."""
        saved = self._saved_keys().get(name)
        if saved != key:
            return False
        self._new_keys[name] = saved  # the saved tuple: one object for both
        return True

    def get(self, name: str) -> Persona | None:
        """The cached persona of a file :meth:`fresh` accepted; None if the cache's
        personas cannot be read after all (then the file is to be loaded and put)."""
        if self._personas is None:
            self._personas = self._read_personas()
        persona = self._personas.get(name)
        if not isinstance(persona, Persona):
            return None
        self._new[name] = persona
        return persona

    def _read_personas(self) -> dict[str, Persona]:
        pickled, self._pickled = self._pickled, b""  # read once: not kept beside the personas
        try:
            personas = _unpickle(pickled) if pickled else {}
        except Exception as error:
            logger.debug("Persona cache %s not used: %s", self.path, error)
            return {}
        return personas if isinstance(personas, dict) else {}

    def put(self, name: str, key: Key, persona: Persona) -> None:
        """Remember the persona loaded from ``name`` (``key``: of its metadata before it was
        read)."""
        self._new_keys[name] = key
        self._new[name] = persona
        self._changed = True

    def save(self, *, detach: bool = False) -> None:
        """Write this load's entries, if anything changed; errors are logged, not raised.

        With ``detach``, a forked child pickles and writes them (where a fork is safe:
        ``call_in_child``) and this returns at once; a load that begins meanwhile waits
        for the write. Pickling 10,000 personas takes about 0.2 s that a start-up
        need not wait for: only the next start reads the cache.
        """
        personas = {name: self._new[name] for name in self._new_keys if name in self._new}
        if not self._changed and personas.keys() == self._saved_keys().keys():
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            logger.debug("Persona cache %s not written: %s", self.path, error)
            return
        lock = self._lock_file()
        try:
            if lock is not None and sys.platform != "win32":
                fcntl.flock(lock, fcntl.LOCK_EX)  # after another writer
            if detach and call_in_child(lambda: self._write(personas)):
                return  # the child holds the lock (the same open file) until it has written
            self._write(personas)
        finally:
            if lock is not None:
                os.close(lock)

    def _write(self, personas: dict[str, Persona]) -> None:
        content = {
            "format": _FORMAT,
            "code": code_fingerprint(),
            "keys": {name: self._new_keys[name] for name in personas},
            "personas": pickle.dumps(personas, protocol=pickle.HIGHEST_PROTOCOL),
        }
        try:
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
