"""Loading persona files from real files: good files, bad files, directories, dumping."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from persona_agent.errors import PersonaFileError
from persona_agent.personas.formats.bounded import StrictLoader, load_json, load_yaml
from persona_agent.personas.loader import (
    dump_persona_yaml,
    load_persona_file,
    parse_persona_text,
    persona_to_data,
)
from persona_agent.personas.model import PERSONA_ID_RULE, Persona
from persona_agent.security.limits import LimitExceeded, Limits
from tests.personas import BUNDLED, persona_data, write_yaml


def load_error(path: Path) -> PersonaFileError:
    with pytest.raises(PersonaFileError) as caught:
        load_persona_file(path)
    error = caught.value
    assert error.path == str(path)
    assert str(error).startswith(f"{path}: ")
    return error


def without(key: str) -> dict[str, Any]:
    data = persona_data()
    del data[key]
    return data


SYNTAX_ERROR = """\
name: Tess
description: A persona.
language_style: {tone: plain
personal_background: x
"""


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(without("name"), "name: Field required", id="missing-name"),
        pytest.param(
            persona_data(knowledge_domains=["physics", "chemistry"]),
            "knowledge_domains: Input should be a valid dictionary",
            id="domains-wrong-type",
        ),
        pytest.param(
            persona_data(knowledge_domains={"Maths": []}),
            "knowledge_domains.Maths: at least one topic is required",
            id="domain-without-topics",
        ),
        pytest.param(
            persona_data(knowledge_domains={"Physics": []}),
            "knowledge_domains.Physics: at least one topic is required",
            id="domain-without-topics",
        ),
        pytest.param(
            persona_data(knowledge_domains={"Quantum physics": ["a"], "quantum-physics": ["b"]}),
            "knowledge_domains: domains 'Quantum physics' and 'quantum-physics' have the same "
            "skill id slug 'quantum-physics'",
            id="colliding-slugs",
        ),
        pytest.param(SYNTAX_ERROR, "YAML syntax error at line 4, column 20", id="yaml-syntax"),
        pytest.param("- name: Tess\n- description: x\n", "top level must be a mapping", id="list"),
        pytest.param("just words\n", "top level must be a mapping, not a str", id="scalar"),
        pytest.param("", "the file is empty", id="empty"),
        pytest.param(
            persona_data(id="somebody-else"),
            "id: 'somebody-else' does not match the persona id 'tess'",
            id="id-mismatch",
        ),
        pytest.param(persona_data(version="abc"), "version: must not be given", id="version"),
        pytest.param(persona_data(hobby="chess"), "hobby: unknown field", id="extra-field"),
        pytest.param(
            persona_data(memory={"token_budget": -1}),
            "memory.token_budget: Input should be greater than or equal to 0",
            id="memory-budget",
        ),
        pytest.param(
            persona_data(memory={"max_items": "many"}),
            "memory.max_items: Input should be a valid integer",
            id="memory-items",
        ),
        pytest.param(
            persona_data(memory={"shared_with": ["Not An Id"]}),
            "memory.shared_with[0]: ",
            id="memory-shared-id",
        ),
        pytest.param(
            persona_data(memory={"shared_with": ["tess"]}),
            "memory: shared_with: 'tess' is this persona",
            id="memory-shared-itself",
        ),
        pytest.param(
            persona_data(memory={"enabled": "sometimes"}),
            "memory.enabled: Input should be a valid boolean",
            id="memory-enabled",
        ),
        pytest.param(
            persona_data(memory={"share": ["a"]}), "memory.share: unknown field", id="memory-extra"
        ),
        pytest.param(
            persona_data(interaction_samples=[{"user": "a", "assistant": "b"}, {"user": "c"}]),
            "interaction_samples[1]: assistant: Field required",
            id="sample-without-answer",
        ),
        pytest.param(
            "name: Tess\nname: Tessa\n", "line 2, column 1: found duplicate key 'name'", id="dup"
        ),
        pytest.param(
            "name: !!python/object/apply:os.system ['true']\n",
            "YAML syntax error at line 1, column 7: could not determine a constructor",
            id="unsafe-tag",
        ),
        # Values their tag cannot take: PyYAML's constructors raise KeyError,
        # AttributeError and ValueError on them, which were 500s and start-up tracebacks.
        pytest.param(
            "name: !!bool maybe\n", "line 1, column 7: invalid !!bool value", id="bool-tag"
        ),
        pytest.param(
            "name: !!timestamp soon\n",
            "line 1, column 7: invalid !!timestamp value",
            id="timestamp-tag",
        ),
        pytest.param(
            "a: [1, 2]\nname: 2001-13-45\n",
            "line 2, column 7: invalid !!timestamp value: month must be in 1..12",
            id="bad-date",
        ),
        pytest.param(
            "name: " + "9" * 5000 + "\n",
            "line 1, column 7: invalid !!int value: Exceeds the limit (4300 digits)",
            id="long-integer",
        ),
        pytest.param(
            "!!map\nname: !!float many\n",
            "line 2, column 7: invalid !!float value: could not convert",
            id="float-tag",
        ),
        pytest.param(
            "<<: {x: 1}\nname: !!bool maybe\n",  # a merge key: read by PyYAML's loader
            "YAML error: a value does not fit its tag",
            id="bool-tag-merged",
        ),
        pytest.param("name: !!set x\n", "a value does not fit its tag", id="set-tag-on-scalar"),
        pytest.param(
            "&a name: &a x\n",
            "line 1, column 10: second occurrence (found duplicate anchor",
            id="anchor-twice",
        ),
    ],
)
def test_a_bad_file_names_the_file_and_the_field(
    tmp_path: Path, content: str | dict[str, Any], expected: str
) -> None:
    path = tmp_path / "tess.yaml"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        write_yaml(path, content)
    error = load_error(path)
    assert any(expected in problem for problem in error.problems), error.problems
    assert expected in str(error)
    assert "Traceback" not in str(error)


def test_every_problem_of_a_file_is_reported(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "tess.yaml", {"name": "Tess", "language_style": {}})
    error = load_error(path)
    assert set(error.problems) == {
        "description: Field required",
        "language_style.tone: Field required",
    }


def test_a_file_of_many_problems_lists_the_first_twenty_and_counts_the_rest(
    tmp_path: Path,
) -> None:
    unknown = {f"field{number}": "x" for number in range(50_000)}
    error = load_error(write_yaml(tmp_path / "tess.yaml", persona_data(**unknown)))
    assert error.problems[:2] == ["field0: unknown field", "field1: unknown field"]
    assert error.problems[20:] == [f"and {50_000 - 20} more problems"]
    assert len(str(error)) < 1000


@pytest.mark.parametrize("stem", ["Bad Name", "UPPER", "-dash", "under_score", "a" * 64])
def test_a_file_name_that_is_not_an_id_is_an_error(tmp_path: Path, stem: str) -> None:
    path = write_yaml(tmp_path / f"{stem}.yaml", persona_data())
    error = load_error(path)
    assert error.problems == [f"file name '{stem}' is not a valid persona id ({PERSONA_ID_RULE})"]


def test_a_file_that_is_not_utf8_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "tess.yaml"
    path.write_bytes("name: Tess\ndescription: caf\u00e9\n".encode("latin-1"))
    assert "not UTF-8 text" in str(load_error(path))


def test_an_unreadable_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "tess.yaml").mkdir()
    assert "cannot read the file" in str(load_error(tmp_path / "tess.yaml"))
    assert "cannot read the file" in str(load_error(tmp_path / "missing.yaml"))


def test_an_unknown_suffix_is_an_error(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "tess.txt", persona_data())
    assert "unknown file type '.txt'" in str(load_error(path))


def test_yaml_yml_and_json_files_give_the_same_persona(tmp_path: Path) -> None:
    data = persona_data(interaction_samples=[{"user": "Hi?", "assistant": "Hello."}])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    from_yaml = load_persona_file(write_yaml(tmp_path / "a" / "tess.yaml", data))
    from_yml = load_persona_file(write_yaml(tmp_path / "b" / "tess.yml", data))
    json_path = tmp_path / "c" / "tess.json"
    json_path.write_text(json.dumps(data), encoding="utf-8")
    from_json = load_persona_file(json_path)
    assert from_yaml == from_yml == from_json
    assert from_yaml.id == "tess"
    assert from_yaml.version == from_json.version


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "tess.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + yaml.safe_dump(persona_data()).encode("utf-8"))
    assert load_persona_file(path).name == "Tess Tester"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"name": "Tess",', "JSON syntax error at line 1, column 17"),
        ('{"name": "Tess", "name": "Tessa"}', "duplicate key 'name'"),
        ("[1, 2]", "top level must be a mapping, not a list"),
        ('{"name": NaN}', "JSON error: NaN is not a JSON value (RFC 8259)"),
        ('{"name": -Infinity}', "JSON error: -Infinity is not a JSON value (RFC 8259)"),
        ('{"name": ' + "9" * 5000 + "}", "JSON error: Exceeds the limit (4300 digits)"),
    ],
)
def test_bad_json_text(text: str, expected: str) -> None:
    with pytest.raises(PersonaFileError) as caught:
        parse_persona_text("tess", text, source="upload.json", fmt="json")
    assert str(caught.value).startswith("upload.json: ")
    assert expected in str(caught.value)


def test_parse_persona_text_checks_the_id_and_names_the_source() -> None:
    text = yaml.safe_dump(persona_data())
    assert parse_persona_text("tess", text, source="upload").id == "tess"
    with pytest.raises(PersonaFileError) as caught:
        parse_persona_text("../../etc/passwd", text, source="upload")
    assert caught.value.path == "upload"
    assert "'../../etc/passwd' is not a valid persona id" in str(caught.value)


RICH: dict[str, Any] = {
    "name": "Rich Roundtrip",
    "description": "Every field, and strings YAML likes to mangle.",
    "personal_background": 'First paragraph.\n\nSecond paragraph, with ünïcödé and "quotes".\n',
    "language_style": {
        "tone": "yes",
        "characteristics": ["null", "1.0", "- dash", "# hash", "key: value", "  indented"],
        "sample_phrases": ["trailing space ", "line one\nline two", "~"],
    },
    "knowledge_domains": {"Edge cases": ["on", "off", "0x1F"], "Numbers as text": ["1905"]},
    "interaction_samples": [
        {"user": "Multi-line?", "assistant": "Yes.\n  Indented second line.\n\n"},
        {"user": "'single quotes'", "assistant": "Tabs\tand \\ backslashes"},
    ],
    "model": {"name": "gpt-test", "temperature": 0.25, "max_tokens": 512},
    "tools": {"allow": ["local", "remote__search"], "required": True},
    "card": {
        "skills": [
            {
                "id": "rich-extra",
                "name": "Extra",
                "description": "An extra skill.",
                "tags": ["a", "b"],
                "examples": ["Do the extra thing"],
            }
        ],
        "examples": ["Example one", "Example two"],
    },
}


def bundled_paths() -> list[Path]:
    return sorted(BUNDLED.glob("*.yaml"))


@pytest.mark.parametrize(
    "persona",
    [
        Persona.from_data("rich-roundtrip", RICH),
        Persona.from_data("no-tools", persona_data(tools={"allow": []})),
        *(load_persona_file(path) for path in bundled_paths()),
    ],
    ids=lambda persona: persona.id,
)
def test_dump_then_load_gives_back_an_equal_persona(tmp_path: Path, persona: Persona) -> None:
    path = tmp_path / f"{persona.id}.yaml"
    path.write_text(dump_persona_yaml(persona), encoding="utf-8")
    loaded = load_persona_file(path)
    assert loaded == persona
    assert loaded.version == persona.version


def test_persona_to_data_has_no_id_version_or_defaults() -> None:
    data = persona_to_data(Persona.from_data("tess", persona_data(model={}, tools={"allow": []})))
    assert data == {**persona_data(), "tools": {"allow": []}}
    assert persona_to_data(Persona.from_data("rich-roundtrip", RICH)) == RICH


def test_dumped_yaml_is_readable(tmp_path: Path) -> None:
    text = dump_persona_yaml(Persona.from_data("rich-roundtrip", RICH))
    assert text.startswith("name: Rich Roundtrip\n")
    assert "personal_background: |\n  First paragraph.\n\n  Second paragraph" in text
    assert "ünïcödé" in text
    assert "version" not in text


@pytest.mark.parametrize(
    "document",
    [
        "a: &x [1, 2]\nb: *x\n",  # an alias: one shared object
        "base: &b {x: 1}\nmore:\n  <<: *b\n  y: 2\n",  # a merge key
        "1: one\nfalse: yes\n2.5: x\n",  # keys that are not strings
        "when: 2026-11-22\nraw: !!binary aGk=\nset: !!set {a, b}\n",  # other types and tags
        "a:\n  b:\n  - x\n  - c: 'quoted'\n    d: |\n      block\n    e: \"double\"\n",  # styles
        "a: yes\nb: 1:20\nc: ~\nd:\ne: !!str 3\nf: '3'\n",  # implicit types, quoted or not
    ],
)
def test_the_bounded_reader_gives_what_pyyaml_gives(document: str) -> None:
    ours, theirs = load_yaml(document), yaml.load(document, Loader=StrictLoader)
    assert repr(ours) == repr(theirs)
    if "&x" in document:
        assert ours["a"] is ours["b"]


@pytest.mark.parametrize(
    ("document", "error"),
    [
        ("x: 1\nnested: {a: 1}\nx: 2\n", "found duplicate key 'x'"),
        ("a: b\n---\nc: d\n", "expected a single document"),
        ("a: [b\n", "expected ',' or ']'"),
        ("a: *nowhere\n", "found undefined alias"),
    ],
)
def test_what_pyyaml_refuses_the_bounded_reader_refuses(document: str, error: str) -> None:
    with pytest.raises(yaml.YAMLError, match=error):
        load_yaml(document)


def alias_bomb(levels: int) -> str:
    """Each anchor a list of nine aliases of the one before: 9**levels strings."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        items = ", ".join([f"*a{level - 1}"] * 9)
        lines.append(f"a{level}: &a{level} [{items}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("document", "limits", "problem"),
    [
        ("[" * 60_000, Limits(), "nested more than 32 deep"),  # libyaml's composer: a crash
        ("[" * 1_000 + "]" * 1_000, Limits(), "nested more than 32 deep"),  # RecursionError
        ("a:\n" + "".join(" " * i + "- \n" for i in range(1, 40)), Limits(), "32 deep"),
        (alias_bomb(9), Limits(), "with its aliases expanded, the content is larger than"),
        ("a: &a [x, *a]\n", Limits(), "alias *a refers to a node that contains it"),
        ("s: &s " + "x" * 600 + "\nt: [*s, *s]\n", Limits(max_bytes=1024), "aliases expanded"),
        ("s: " + "x" * 2000 + "\n", Limits(max_bytes=1024), "the file is 2004 bytes"),
        ("a: &a [[[x]]]\nb: [[[[[*a]]]]]\n", Limits(max_depth=8), "more than 8 deep"),
    ],
)
def test_yaml_over_the_limits_is_refused_before_it_is_built(
    document: str, limits: Limits, problem: str
) -> None:
    with pytest.raises(LimitExceeded, match=re.escape(problem)):
        load_yaml(document, limits)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ("[" * 60_000, "nested more than 32 deep"),  # json's own RecursionError
        ('{"a": ' * 40 + "1" + "}" * 40, "nested more than 32 deep"),
        ('{"s": "' + "x" * 2000 + '"}', "more than the limit of 1024 bytes"),
    ],
)
def test_json_over_the_limits_is_refused(document: str, problem: str) -> None:
    with pytest.raises(LimitExceeded, match=re.escape(problem)):
        load_json(document, Limits(max_bytes=1024) if "x" * 2000 in document else Limits())


def test_a_persona_over_the_limits_is_a_persona_file_error_naming_the_setting() -> None:
    with pytest.raises(PersonaFileError) as caught:
        parse_persona_text("deep", "[" * 60_000, source="deep.yaml")
    assert str(caught.value) == (
        "deep.yaml: lists and mappings are nested more than 32 deep "
        "(PERSONA_AGENT_MAX_PERSONA_DEPTH)"
    )
