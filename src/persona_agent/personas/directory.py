"""Loading a persona directory: every persona file in it, through the persona cache,
parsed on two cores when there are many."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISREG

from persona_agent.errors import PersonaFileError
from persona_agent.personas.cache import Key, PersonaCache, file_key
from persona_agent.personas.forks import ForkedMap
from persona_agent.personas.loader import PERSONA_SUFFIXES, load_persona_file
from persona_agent.personas.model import Persona

__all__ = ["HELPER_MIN_FILES", "DirectoryLoad", "load_persona_dir"]

HELPER_MIN_FILES = 256
"""From this many files, a load takes a second process: with this many to parse, a forked
helper parses alongside (about 40 ms of work); with this many personas to write to the
cache, a forked child writes them (``PersonaCache.save``)."""


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a directory loads; as it was afterwards.

    A load builds objects that all stay alive, without cycles: every collection on
    the way would scan the whole process for nothing. With the hub's modules loaded,
    10,000 files loaded cold in 2.2 s instead of 2.8 s (docs/performance.md).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load(path: str) -> Persona | PersonaFileError:
    try:
        return load_persona_file(path)
    except PersonaFileError as error:
        return error


class DirectoryLoad:
    """The load of a persona directory, in two steps so that other work can go on between.

    Making one lists the directory and checks each file against the cache (its
    keys only); when at least ``helper_min_files`` files are left to parse, a
    forked helper starts parsing them at once (:class:`ForkedMap`). :meth:`finish`
    parses what the helper has not taken, gathers the rest, and saves the cache
    (with at least ``helper_min_files`` personas, in a forked child).
    ``serve`` makes one before it imports the server, and finishes it after: what
    lives in between is little (a name a file, a key a file to parse), since it
    stays in memory among what the imports build.

    Hidden files (``.name``) are skipped. A second file with the same id
    (``a.yaml`` and ``a.yml``) is an error, and the first one by name wins.

    Raises:
        OSError: the directory cannot be listed.
    """

    def __init__(
        self,
        directory: Path,
        *,
        cache: PersonaCache | None = None,
        helper_min_files: int = HELPER_MIN_FILES,
    ) -> None:
        self._directory = directory
        self._cache = cache
        self._helper_min_files = helper_min_files
        self._names: list[str | PersonaFileError] = []
        """Every persona file by name; a duplicate id as its error."""
        self._keys: dict[str, Key] = {}
        """The files to parse: their keys (taken before they are read), in order."""
        first_file: dict[str, str] = {}
        paths: list[str] = []
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        with _collector_paused():
            for entry in entries:
                name = entry.name
                stem, suffix = os.path.splitext(name)
                if name.startswith(".") or suffix.lower() not in PERSONA_SUFFIXES:
                    continue
                try:
                    stat = entry.stat()  # follows symbolic links, as is_file() does
                except OSError:
                    continue
                if not S_ISREG(stat.st_mode):
                    continue
                if stem in first_file:
                    problem = f"persona id '{stem}' is already defined by {first_file[stem]}"
                    self._names.append(PersonaFileError(entry.path, [problem]))
                    continue
                first_file[stem] = name
                self._names.append(name)
                key = file_key(stat)
                if cache is None or not cache.fresh(name, key):
                    self._keys[name] = key
                    paths.append(entry.path)
            self._parsing = ForkedMap(_load, paths, min_items=helper_min_files)

    @property
    def helped(self) -> int:
        """How many chunks of files the helper parsed (after :meth:`finish`)."""
        return self._parsing.helped

    def finish(self) -> tuple[dict[str, Persona], list[PersonaFileError]]:
        """The valid personas by id, and one error per bad file, both in file-name order.
        Call once."""
        cache = self._cache
        with _collector_paused():
            loaded = dict(zip(self._keys, self._parsing.results(), strict=True))
            personas: dict[str, Persona] = {}
            errors: list[PersonaFileError] = []
            for name in self._names:
                if isinstance(name, PersonaFileError):
                    errors.append(name)
                    continue
                result = loaded.get(name)
                if result is None:  # fresh in the cache
                    result = cache.get(name) if cache is not None else None
                    if result is None:  # the cache's personas could not be read after all
                        path = os.path.join(self._directory, name)
                        self._keys[name] = file_key(os.stat(path))
                        result = loaded[name] = _load(path)
                if isinstance(result, PersonaFileError):
                    errors.append(result)
                    continue
                personas[result.id] = result
                if cache is not None and name in loaded:
                    cache.put(name, self._keys[name], result)
            if cache is not None:
                cache.save(detach=len(personas) >= self._helper_min_files)
        return personas, errors


def load_persona_dir(
    directory: Path, *, cache: PersonaCache | None = None
) -> tuple[dict[str, Persona], list[PersonaFileError]]:
    """Every persona file directly in ``directory``: the valid personas by id and one
    error per bad file (see :class:`DirectoryLoad`). With ``cache``, a file unchanged
    since it was cached is neither parsed nor validated again (see :class:`PersonaCache`),
    and the cache is saved at the end.

    Raises:
        OSError: the directory cannot be listed.
    """
    return DirectoryLoad(directory, cache=cache).finish()
