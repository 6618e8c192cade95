"""Loading a persona directory: good personas and every bad file, in file-name order,
the same whether one process parses the files or a forked helper shares the work."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from persona_agent.personas.cache import PersonaCache, file_key
from persona_agent.personas.directory import load_persona_dir
from tests.personas import persona_data, run_python, write_yaml

SYNTAX_ERROR = """\
name: Tess
description: A persona.
language_style: {tone: plain
personal_background: x
"""


def without(key: str) -> dict[str, Any]:
    data = persona_data()
    del data[key]
    return data


def test_load_persona_dir_keeps_good_personas_and_collects_errors(tmp_path: Path) -> None:
    write_yaml(tmp_path / "alpha.yaml", persona_data(name="Alpha"))
    write_yaml(tmp_path / "beta.yml", persona_data(name="Beta"))
    (tmp_path / "gamma.json").write_text(json.dumps(persona_data(name="Gamma")), "utf-8")
    write_yaml(tmp_path / "broken.yaml", without("description"))
    (tmp_path / "syntax.yaml").write_text(SYNTAX_ERROR, encoding="utf-8")
    write_yaml(tmp_path / "alpha.yml", persona_data(name="Alpha again"))
    write_yaml(tmp_path / "Bad Name.yaml", persona_data())
    # Not persona files: ignored.
    (tmp_path / "README.md").write_text("# personas\n", encoding="utf-8")
    (tmp_path / ".alpha.yaml.1234.tmp").write_text("partial", encoding="utf-8")
    write_yaml(tmp_path / ".hidden.yaml", persona_data())
    (tmp_path / "folder.yaml").mkdir()

    personas, errors = load_persona_dir(tmp_path)

    assert list(personas) == ["alpha", "beta", "gamma"]
    assert personas["alpha"].name == "Alpha"
    assert [Path(error.path).name for error in errors] == [
        "Bad Name.yaml",
        "alpha.yml",
        "broken.yaml",
        "syntax.yaml",
    ]
    duplicate = errors[1]
    assert duplicate.problems == ["persona id 'alpha' is already defined by alpha.yaml"]
    assert "description: Field required" in str(errors[2])
    assert "YAML syntax error at line 4" in str(errors[3])


def test_load_persona_dir_of_an_empty_directory(tmp_path: Path) -> None:
    assert load_persona_dir(tmp_path) == ({}, [])


@pytest.mark.parametrize("enabled", [True, False])
def test_load_persona_dir_leaves_the_garbage_collector_as_it_was(
    tmp_path: Path, enabled: bool
) -> None:
    # The collector is paused while a directory loads; a bad file (an error collected
    # on the way) must not leave it off, nor a load turn on one the caller turned off.
    write_yaml(tmp_path / "alpha.yaml", persona_data())
    (tmp_path / "syntax.yaml").write_text(SYNTAX_ERROR, encoding="utf-8")
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        personas, errors = load_persona_dir(tmp_path)
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
    assert list(personas) == ["alpha"]
    assert len(errors) == 1


def many_files(directory: Path, count: int) -> None:
    """``count`` personas, one in seven of them bad in one of three ways, and a duplicate id."""
    directory.mkdir(exist_ok=True)
    for number in range(count):
        path = directory / f"p{number:04d}.yaml"
        if number % 7 == 3:
            path.write_text(SYNTAX_ERROR, encoding="utf-8")
        elif number % 7 == 5:
            write_yaml(path, without("knowledge_domains"))
        elif number % 7 == 6:
            (directory / f"p{number:04d}.json").write_text(
                json.dumps(persona_data(name=f"JSON {number}")), "utf-8"
            )
        else:
            write_yaml(path, persona_data(name=f"Persona {number}"))
    write_yaml(directory / "p0000.yml", persona_data(name="A second p0000"))


LOAD_BOTH_WAYS = """\
import json, os, sys
from pathlib import Path
from persona_agent.personas.cache import PersonaCache
from persona_agent.personas.directory import DirectoryLoad

directory, cache = Path(sys.argv[1]), Path(sys.argv[2])
FORKS = []
os.register_at_fork(before=lambda: FORKS.append(1))

def summary(load):
    personas, errors = load.finish()
    return {
        "personas": {id: p.model_dump(mode="json") for id, p in personas.items()},
        "order": list(personas),
        "errors": [[e.path, e.problems, str(e)] for e in errors],
    }

alone = summary(DirectoryLoad(directory, helper_min_files=10**9))
helped = DirectoryLoad(directory, cache=PersonaCache(cache), helper_min_files=1)
both = summary(helped)
print(json.dumps({"alone": alone, "helped": both, "chunks": helped.helped, "forks": len(FORKS)}))
"""


def load_both_ways(directory: Path, cache: Path) -> dict[str, Any]:
    """In a fresh interpreter (one thread, so a helper is forked): the directory loaded
    alone, then with a helper and ``cache``."""
    return run_python("-c", LOAD_BOTH_WAYS, str(directory), str(cache))


def test_a_helper_process_loads_what_one_process_loads(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    many_files(directory, 600)
    cache = tmp_path / "cache.pickle"
    out = load_both_ways(directory, cache)
    assert out["forks"] == 2  # the helper, and the child that writes the cache
    assert out["chunks"] > 0  # the helper parsed some of the files
    assert out["helped"] == out["alone"]
    assert len(out["alone"]["personas"]) == 600 - 2 * (600 // 7) - (1 if 600 % 7 > 3 else 0)
    assert out["alone"]["order"] == sorted(out["alone"]["order"])
    errors = out["alone"]["errors"]
    names = [Path(path).name for path, _, _ in errors]
    assert names[:3] == ["p0000.yml", "p0003.yaml", "p0005.yaml"]
    assert errors[0][1] == ["persona id 'p0000' is already defined by p0000.yaml"]
    assert "YAML syntax error at line 4" in errors[1][2]
    assert "knowledge_domains: Field required" in errors[2][2]
    # The child may still be writing the cache (its parent has exited): a reader waits.
    saved = PersonaCache(cache)
    fresh = [p.stem for p in directory.iterdir() if saved.fresh(p.name, file_key(p.stat()))]
    assert sorted(fresh) == sorted(out["alone"]["personas"])


def test_with_a_cache_only_the_changed_files_are_parsed_and_shared(tmp_path: Path) -> None:
    """A second start from the cache the first wrote, with a third of the files changed:
    the helper parses some of the changed ones, the cache gives the rest."""
    directory = tmp_path / "personas"
    cache = tmp_path / "cache.pickle"
    many_files(directory, 900)
    first = load_both_ways(directory, cache)
    assert first["helped"] == first["alone"]
    for number in range(0, 900, 3):
        path = directory / f"p{number:04d}.yaml"
        if number % 7 in (0, 1, 2, 4):  # a good file: still good, with a new name
            write_yaml(path, persona_data(name=f"Renamed {number}"))
    (directory / "p0003.yaml").unlink()  # a bad file gone
    second = load_both_ways(directory, cache)
    assert second["forks"] == 2
    assert second["chunks"] > 0
    assert second["helped"] == second["alone"]
    assert second["alone"]["personas"]["p0000"]["name"] == "Renamed 0"
    assert second["alone"]["personas"]["p0001"]["name"] == "Persona 1"
    assert "p0003.yaml" not in json.dumps(second["alone"]["errors"])
