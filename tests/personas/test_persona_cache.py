"""The persona cache: a restart reads only changed files; other code or a foreign file
means no cache, never a wrong persona."""

from __future__ import annotations

import os
import pickle
import sys
import threading
from pathlib import Path

import pytest

if sys.platform != "win32":
    import fcntl

from persona_agent.personas import cache as cache_module
from persona_agent.personas.cache import PersonaCache, file_key
from persona_agent.personas.directory import load_persona_dir
from persona_agent.personas.store import FilePersonaStore

PERSONA = """\
name: {name}
description: A persona for the persona cache tests.
personal_background: Written by a test.
language_style:
  tone: plain
knowledge_domains:
  Testing: [caches]
"""


def cached(cache: Path, directory: Path) -> list[str]:
    """The files of ``directory`` the cache holds as they are now."""
    saved = PersonaCache(cache)
    return sorted(p.name for p in directory.iterdir() if saved.fresh(p.name, file_key(p.stat())))


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    personas = tmp_path / "personas"
    personas.mkdir()
    for name in ("alpha", "beta"):
        (personas / f"{name}.yaml").write_text(PERSONA.format(name=name.title()))
    return personas


def test_a_second_load_comes_from_the_cache_and_equals_the_first(
    directory: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache" / "personas.pickle"
    first, errors = load_persona_dir(directory, cache=PersonaCache(cache))
    assert errors == []
    assert cache.is_file()
    second, errors = load_persona_dir(directory, cache=PersonaCache(cache))
    assert errors == []
    assert second == first


def test_the_cache_is_keyed_by_size_mtime_and_inode(directory: Path, tmp_path: Path) -> None:
    """Shows the cache is what the second load read: an edit that keeps the size, the
    modification time and the inode goes unseen (as Python's bytecode cache would)."""
    cache = tmp_path / "personas.pickle"
    load_persona_dir(directory, cache=PersonaCache(cache))
    path = directory / "alpha.yaml"
    stat = path.stat()
    with path.open("r+") as file:  # same inode, same size
        file.write(path.read_text().replace("Alpha", "Omega"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    personas, _ = load_persona_dir(directory, cache=PersonaCache(cache))
    assert personas["alpha"].name == "Alpha"
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    personas, _ = load_persona_dir(directory, cache=PersonaCache(cache))
    assert personas["alpha"].name == "Omega"


def test_a_changed_file_is_parsed_again(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "personas.pickle"
    load_persona_dir(directory, cache=PersonaCache(cache))
    (directory / "alpha.yaml").write_text(PERSONA.format(name="Alpha the Second"))
    personas, errors = load_persona_dir(directory, cache=PersonaCache(cache))
    assert errors == []
    assert personas["alpha"].name == "Alpha the Second"


def test_a_cache_written_by_other_code_is_not_used(
    directory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Personas come from the cache only if the code that validated them is the code
    running now: a new rule must see every file again."""
    cache = tmp_path / "personas.pickle"
    load_persona_dir(directory, cache=PersonaCache(cache))
    path = directory / "alpha.yaml"
    stat = path.stat()
    with path.open("r+") as file:  # an edit the file's metadata does not show
        file.write(path.read_text().replace("Alpha", "Omega"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_persona_dir(directory, cache=PersonaCache(cache))[0]["alpha"].name == "Alpha"
    monkeypatch.setattr(cache_module, "code_fingerprint", lambda: "other code")
    personas, errors = load_persona_dir(directory, cache=PersonaCache(cache))
    assert errors == []
    assert personas["alpha"].name == "Omega"


def test_a_cache_that_would_run_code_is_refused(directory: Path, tmp_path: Path) -> None:
    """The cache is a pickle: one naming anything but the persona model's classes is not
    loaded (nothing runs), and the personas are read from their files."""
    cache = tmp_path / "personas.pickle"
    marker = tmp_path / "ran"
    cache.write_bytes(pickle.dumps(_RunsCode(str(marker))))
    personas, errors = load_persona_dir(directory, cache=PersonaCache(cache))
    assert sorted(personas) == ["alpha", "beta"]
    assert errors == []
    assert not marker.exists()
    assert cached(cache, directory) == ["alpha.yaml", "beta.yaml"]


class _RunsCode:
    """Pickles to a call of ``pathlib.Path.touch``: what a hostile cache file could hold."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, ...]:
        return (Path.touch, (Path(self.path),))


def test_a_bad_file_is_not_cached_and_still_stops_the_load(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "personas.pickle"
    (directory / "gamma.yaml").write_text("name: [unclosed\n")
    for _ in range(2):
        personas, errors = load_persona_dir(directory, cache=PersonaCache(cache))
        assert sorted(personas) == ["alpha", "beta"]
        assert len(errors) == 1
        assert "YAML syntax error" in str(errors[0])
    assert cached(cache, directory) == ["alpha.yaml", "beta.yaml"]


def test_an_unreadable_or_foreign_cache_is_ignored(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "personas.pickle"
    cache.write_text("not a cache\x00\n")
    personas, errors = load_persona_dir(directory, cache=PersonaCache(cache))
    assert sorted(personas) == ["alpha", "beta"]
    assert errors == []
    assert cached(cache, directory) == ["alpha.yaml", "beta.yaml"]


def test_the_store_loads_through_its_cache(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "data" / "cache" / "personas.pickle"
    store = FilePersonaStore(directory, cache=cache)
    assert store.load() == []
    again = FilePersonaStore(directory, cache=cache)
    assert again.load() == []
    assert again._personas == store._personas
    assert cached(cache, directory) == ["alpha.yaml", "beta.yaml"]


def test_keys_that_say_fresh_over_personas_that_cannot_be_read(
    directory: Path, tmp_path: Path
) -> None:
    """The keys are read before the personas: if the personas then cannot be read, the
    files the keys called fresh are parsed after all, and the cache is written again."""
    cache = tmp_path / "personas.pickle"
    first, _ = load_persona_dir(directory, cache=PersonaCache(cache))
    content = pickle.loads(cache.read_bytes())
    content["personas"] = b"\x80\x05not a pickle"
    cache.write_bytes(pickle.dumps(content))
    assert cached(cache, directory) == ["alpha.yaml", "beta.yaml"]
    personas, errors = load_persona_dir(directory, cache=PersonaCache(cache))
    assert errors == []
    assert personas == first
    assert pickle.loads(cache.read_bytes())["personas"] != b"\x80\x05not a pickle"
    assert load_persona_dir(directory, cache=PersonaCache(cache))[0] == first


@pytest.mark.skipif(sys.platform == "win32", reason="no file locks, and no fork, on Windows")
def test_a_load_waits_for_a_cache_being_written(directory: Path, tmp_path: Path) -> None:
    """A start right after another finds the cache the other is still writing (in a
    child process, under the lock), not the one before it."""
    cache = tmp_path / "personas.pickle"
    load_persona_dir(directory, cache=PersonaCache(cache))
    older = cache.read_bytes()
    (directory / "alpha.yaml").write_text(PERSONA.format(name="Alpha Two"))
    load_persona_dir(directory, cache=PersonaCache(cache))
    newer = cache.read_bytes()
    cache.write_bytes(older)
    key = file_key((directory / "alpha.yaml").stat())

    found: list[bool] = []
    lock = os.open(f"{cache}.lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)  # a writer at work
    try:
        reader = threading.Thread(
            target=lambda: found.append(PersonaCache(cache).fresh("alpha.yaml", key))
        )
        reader.start()
        reader.join(timeout=0.2)
        assert reader.is_alive()  # waiting for the writer
        cache.write_bytes(newer)  # what the writer wrote
    finally:
        os.close(lock)  # the writer is done
    reader.join(timeout=30)
    assert found == [True]
