"""Loading a persona directory: good personas and every bad file, in file-name order;
what interrupted writes left behind is removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from persona_agent.personas.scan import load_persona_dir, remove_temporary_files
from persona_agent.personas.stores.file_store import FilePersonaStore
from persona_agent.security.limits import Limits
from tests.personas import persona_data, write_yaml

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


def test_a_file_over_the_limits_is_an_error_naming_it_and_the_others_load(
    tmp_path: Path,
) -> None:
    write_yaml(tmp_path / "alpha.yaml", persona_data())
    (tmp_path / "big.yaml").write_text("name: " + "x" * 5000 + "\n", encoding="utf-8")
    (tmp_path / "deep.yaml").write_text("[" * 60_000, encoding="utf-8")

    personas, errors = load_persona_dir(tmp_path, Limits(max_bytes=4096, max_depth=8))

    assert list(personas) == ["alpha"]
    assert [(Path(e.path).name, e.problems) for e in errors] == [
        (
            "big.yaml",
            [
                "the file is 5007 bytes, more than the limit of 4096 bytes "
                "(PERSONA_AGENT_MAX_PERSONA_BYTES)"
            ],
        ),
        (
            "deep.yaml",
            [
                "the file is 60000 bytes, more than the limit of 4096 bytes "
                "(PERSONA_AGENT_MAX_PERSONA_BYTES)"
            ],
        ),
    ]
    _, errors = load_persona_dir(tmp_path, Limits(max_bytes=100_000, max_depth=8))
    assert [e.problems for e in errors][1:] == [  # big.yaml, now loaded, lacks fields
        ["lists and mappings are nested more than 8 deep (PERSONA_AGENT_MAX_PERSONA_DEPTH)"]
    ]


def test_the_store_removes_what_interrupted_writes_left_and_serves_the_last_whole_file(
    tmp_path: Path,
) -> None:
    write_yaml(tmp_path / "alpha.yaml", persona_data(name="Whole"))
    # What a write killed before its rename leaves: the store's own temporary name
    # (tempfile.mkstemp), and import-persona's.
    (tmp_path / ".alpha.yaml.k2_x9q1a.tmp").write_text("name: Half", encoding="utf-8")
    (tmp_path / ".beta.json.tmp").write_text("{", encoding="utf-8")
    (tmp_path / ".notes.tmp").write_text("not ours", encoding="utf-8")

    store = FilePersonaStore(tmp_path)
    assert store.load() == []

    assert sorted(p.name for p in tmp_path.iterdir()) == [".notes.tmp", "alpha.yaml"]
    assert [p.name for p in store._personas.values()] == ["Whole"]
    assert remove_temporary_files(tmp_path) == []
