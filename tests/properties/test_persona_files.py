"""Properties of persona files: valid ones round-trip, broken ones name the file and field."""

from __future__ import annotations

import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persona_agent.errors import PersonaFileError
from persona_agent.personas.formats.bounded import StrictLoader, load_yaml
from persona_agent.personas.loader import dump_persona_yaml, load_persona_file
from persona_agent.personas.model import CONVERSATION_SKILL, slugify
from persona_agent.security.limits import LimitExceeded

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Printable text with at least one letter: what a persona author writes.
words = st.text(
    alphabet=string.ascii_letters + string.digits + " .,'!?-éü", min_size=1, max_size=40
)
text = words.filter(lambda value: any(char.isalpha() for char in value))
domain = text.filter(lambda value: slugify(value) not in ("", CONVERSATION_SKILL))

personas = st.fixed_dictionaries(
    {
        "name": text,
        "description": text,
        "personal_background": text,
        "language_style": st.fixed_dictionaries(
            {"tone": text},
            optional={
                "characteristics": st.lists(text, max_size=3),
                "sample_phrases": st.lists(text, max_size=3),
            },
        ),
        "knowledge_domains": st.dictionaries(
            domain, st.lists(text, min_size=1, max_size=3), min_size=1, max_size=3
        ).filter(lambda d: len({slugify(k) for k in d}) == len(d)),
    },
    optional={
        "interaction_samples": st.lists(
            st.fixed_dictionaries({"user": text, "assistant": text}), max_size=3
        ),
        "model": st.fixed_dictionaries(
            {},
            optional={
                "temperature": st.floats(0, 2, allow_nan=False),
                "max_tokens": st.integers(1, 4000),
            },
        ),
    },
)

REQUIRED = ["name", "description"]
"""The rest is optional: a character card has no background, style or domains."""


def write(directory: Path, content: str) -> Path:
    path = directory / "someone.yaml"
    path.write_text(content, encoding="utf-8")
    return path


@SETTINGS
@given(data=personas)
def test_a_valid_file_loads_and_round_trips(data: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        persona = load_persona_file(write(Path(tmp), yaml.safe_dump(data, allow_unicode=True)))
        assert persona.id == "someone"
        assert persona.name == data["name"]
        assert persona.knowledge_domains == data["knowledge_domains"]
        assert persona.language_style is not None
        assert persona.language_style.tone == data["language_style"]["tone"]
        # Dumped and loaded again: the same persona, the same version.
        again = load_persona_file(write(Path(tmp), dump_persona_yaml(persona)))
        assert again == persona
        assert again.version == persona.version


@SETTINGS
@given(data=personas, missing=st.sampled_from(REQUIRED))
def test_a_missing_field_is_named(data: dict[str, Any], missing: str) -> None:
    del data[missing]
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), yaml.safe_dump(data, allow_unicode=True))
        with pytest.raises(PersonaFileError) as caught:
            load_persona_file(path)
    assert str(path) in str(caught.value)
    assert any(p.startswith(f"{missing}:") for p in caught.value.problems), caught.value


wrong_values = st.one_of(
    st.integers(), st.booleans(), st.lists(st.integers(), min_size=1), st.just(""), st.just("  ")
)


@SETTINGS
@given(
    data=personas,
    field=st.sampled_from(["name", "description", "language_style"]),
    value=wrong_values,
)
def test_a_field_of_the_wrong_type_is_named(data: dict[str, Any], field: str, value: Any) -> None:
    data[field] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp), yaml.safe_dump(data, allow_unicode=True))
        with pytest.raises(PersonaFileError) as caught:
            load_persona_file(path)
    assert str(path) in str(caught.value)
    assert any(p.startswith(field) for p in caught.value.problems), caught.value


@SETTINGS
@given(content=st.one_of(st.text(max_size=300), st.binary(max_size=300)))
def test_any_content_loads_or_gives_a_persona_file_error(content: str | bytes) -> None:
    """Arbitrary text or bytes: a persona, or an error naming the file; never anything else."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "someone.yaml"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        error = load_error(path)
    if error is not None:
        assert str(error).startswith(f"{path}: ")
        assert error.problems
        assert all(problem.strip() for problem in error.problems)


def load_error(path: Path) -> PersonaFileError | None:
    """The error loading ``path`` gives, or None when it loads; any other exception escapes."""
    try:
        load_persona_file(path)
    except PersonaFileError as error:
        return error
    return None


# Any YAML that a safe dump of JSON-like data can give, with every scalar style PyYAML picks.
yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


# Text only (what persona files are), with strings PyYAML reads as other types when
# unquoted among them.
typed_looking = st.sampled_from(
    ["yes", "No", "on", "~", "null", "", "1:20", "0x1F", "-.inf", "2026-11-23", "<<", "=", "3"]
)
text_values = st.recursive(
    st.text(max_size=20) | typed_looking,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | typed_looking, inner, max_size=4)
    ),
    max_leaves=20,
)


@SETTINGS
@given(value=yaml_values, flow=st.booleans())
def test_the_bounded_reader_builds_what_pyyaml_builds(value: Any, flow: bool) -> None:
    document = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    assert load_yaml(document) == yaml.load(document, Loader=StrictLoader)


@SETTINGS
@given(
    value=st.dictionaries(st.text(max_size=8) | typed_looking, text_values, max_size=5),
    flow=st.booleans(),
    style=st.sampled_from([None, "'", '"', "|", ">"]),
)
def test_text_documents_load_as_pyyaml_loads_them_in_every_scalar_style(
    value: dict[str, Any], flow: bool, style: str | None
) -> None:
    document = yaml.safe_dump(
        value, default_flow_style=flow, default_style=style, allow_unicode=True
    )
    assert load_yaml(document) == yaml.load(document, Loader=StrictLoader)


# Pieces of YAML that reach every path of the bounded reader: tags (on scalars and
# collections, fitting their value or not), anchors given twice, aliases, merge keys,
# complex keys, several documents.
yaml_pieces = st.sampled_from(
    [
        *("!!bool ", "!!int ", "!!float ", "!!timestamp ", "!!binary ", "!!null ", "!!str "),
        *("!!set ", "!!map ", "!!seq ", "!!omap ", "!foo ", "!!python/name:os.system "),
        *("name: ", "a: ", "1: ", "null: ", "? ", ": ", "- ", ", ", "\n", "  "),
        *("[", "]", "{", "}", "'", '"', "|\n", "---\n", "...\n", "%YAML 1.1\n"),
        *("&a ", "*a", "&b ", "*b", "<<: ", "<<: [*a, *b]\n"),
        *("maybe", "yes", "~", "0x1F", ".inf", "2001-13-45", "2001-12-14", "QUJD", "1"),
    ]
)


def _same(value: Any) -> Any:
    """``value`` with NaN made comparable."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, dict):
        return {key: _same(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_same(item) for item in value]
    return value


def _read(reader: Any, text: str) -> tuple[str, Any]:
    try:
        return "read", _same(reader(text))
    except yaml.YAMLError:
        return "refused", None


@settings(max_examples=300, deadline=None)
@given(text=st.lists(yaml_pieces, max_size=20).map("".join))
def test_the_bounded_reader_reads_what_pyyaml_reads_and_refuses_what_it_refuses(
    text: str,
) -> None:
    """Where PyYAML's strict loader raises (a KeyError for ``!!bool maybe``, a ValueError
    for ``2001-13-45``, a YAMLError), the bounded reader raises a YAMLError; anything else
    it reads as PyYAML does."""

    def pyyaml(text: str) -> Any:
        try:
            return yaml.load(text, Loader=StrictLoader)
        except (ValueError, TypeError, LookupError, AttributeError) as error:
            raise yaml.YAMLError(str(error)) from None

    try:
        ours = _read(load_yaml, text)
    except LimitExceeded as error:
        refusal = str(error)
    else:
        assert ours == _read(pyyaml, text)
        return
    # An alias inside the node it names (``&b [*b]``) is refused on purpose, before the
    # rest is parsed: PyYAML builds a recursive value or fails on a later error.
    assert "refers to a node that contains it" in refusal, refusal
