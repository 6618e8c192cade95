"""The parse cache: a restart parses only changed files, and validates every persona."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from persona_agent.personas.loader import load_persona_dir
from persona_agent.personas.parse_cache import ParseCache
from persona_agent.personas.store import FilePersonaStore

PERSONA = """\
name: {name}
description: A persona for the parse cache tests.
personal_background: Written by a test.
language_style:
  tone: plain
knowledge_domains:
  Testing: [caches]
"""


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
    cache = tmp_path / "cache" / "personas.tsv"
    first, errors = load_persona_dir(directory, cache=ParseCache(cache))
    assert errors == []
    assert cache.is_file()
    second, errors = load_persona_dir(directory, cache=ParseCache(cache))
    assert errors == []
    assert second == first


def test_the_cache_is_keyed_by_size_mtime_and_inode(directory: Path, tmp_path: Path) -> None:
    """Shows the cache is what the second load read: an edit that keeps the size, the
    modification time and the inode goes unseen (as Python's bytecode cache would)."""
    cache = tmp_path / "personas.tsv"
    load_persona_dir(directory, cache=ParseCache(cache))
    path = directory / "alpha.yaml"
    stat = path.stat()
    with path.open("r+") as file:  # same inode, same size
        file.write(path.read_text().replace("Alpha", "Omega"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    personas, _ = load_persona_dir(directory, cache=ParseCache(cache))
    assert personas["alpha"].name == "Alpha"
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    personas, _ = load_persona_dir(directory, cache=ParseCache(cache))
    assert personas["alpha"].name == "Omega"


def test_a_changed_file_is_parsed_again(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "personas.tsv"
    load_persona_dir(directory, cache=ParseCache(cache))
    (directory / "alpha.yaml").write_text(PERSONA.format(name="Alpha the Second"))
    personas, errors = load_persona_dir(directory, cache=ParseCache(cache))
    assert errors == []
    assert personas["alpha"].name == "Alpha the Second"


def test_cached_content_is_validated_again(directory: Path, tmp_path: Path) -> None:
    """A cache entry that does not validate (say, written by an older version) is an error."""
    cache = tmp_path / "personas.tsv"
    load_persona_dir(directory, cache=ParseCache(cache))
    lines = cache.read_text().splitlines()
    lines = [line.replace('"tone":"plain"', '"tone":""') for line in lines]
    cache.write_text("\n".join(lines) + "\n")
    personas, errors = load_persona_dir(directory, cache=ParseCache(cache))
    assert sorted(personas) == []
    assert [str(e).split(":")[0] for e in errors] == [
        str(directory / "alpha.yaml"),
        str(directory / "beta.yaml"),
    ]
    assert all("language_style.tone" in str(e) for e in errors)


def test_a_bad_file_is_not_cached_and_still_stops_the_load(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "personas.tsv"
    (directory / "gamma.yaml").write_text("name: [unclosed\n")
    for _ in range(2):
        personas, errors = load_persona_dir(directory, cache=ParseCache(cache))
        assert sorted(personas) == ["alpha", "beta"]
        assert len(errors) == 1
        assert "YAML syntax error" in str(errors[0])
    assert "gamma.yaml" not in cache.read_text()


def test_an_unreadable_or_foreign_cache_is_ignored(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "personas.tsv"
    cache.write_text("not a cache\x00\n")
    personas, errors = load_persona_dir(directory, cache=ParseCache(cache))
    assert sorted(personas) == ["alpha", "beta"]
    assert errors == []
    assert cache.read_text().startswith("persona-parse-cache/1\n")


def test_the_store_loads_through_its_cache(directory: Path, tmp_path: Path) -> None:
    cache = tmp_path / "data" / "cache" / "personas.tsv"
    store = FilePersonaStore(directory, parse_cache=cache)
    assert store.load() == []
    again = FilePersonaStore(directory, parse_cache=cache)
    assert again.load() == []
    assert again._personas == store._personas
    assert "alpha.yaml" in cache.read_text()
