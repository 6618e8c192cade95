"""Reading and writing persona files (YAML or JSON).

Every problem with a file becomes a :class:`PersonaFileError` that names the
file and, for each problem, the field and the reason: never a traceback.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Hashable
from typing import Any, Literal

import ryaml
import yaml
from pydantic import ValidationError

from persona_agent.errors import PersonaFileError
from persona_agent.personas.model import PERSONA_ID_PATTERN, Persona, is_valid_persona_id

__all__ = [
    "PERSONA_SUFFIXES",
    "dump_persona_yaml",
    "load_persona_file",
    "parse_persona_text",
    "persona_to_data",
    "validation_problems",
]

PERSONA_SUFFIXES: dict[str, Literal["yaml", "json"]] = {
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
}
"""File name suffixes of persona files, and their formats."""

_MERGE_TAG = "tag:yaml.org,2002:merge"


# libyaml's parser when PyYAML was built with it (it is, in its wheels): some 5x faster.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """A safe loader that refuses a key given twice in one mapping (rather than
    silently keeping the last value)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        mapping: dict[Hashable, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_STR_TAG = "tag:yaml.org,2002:str"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"


class _Unusual(Exception):
    """The document has something the plain construction leaves to PyYAML's own."""


def _load_yaml(text: str) -> Any:
    """The YAML document in ``text``, exactly as :class:`_StrictLoader` loads it, faster.

    A document of plain text (mappings, lists and strings only: what persona files
    are) is read by ryaml, in Rust, about 4x faster than PyYAML with libyaml
    (:func:`_plain_text_document`). Otherwise libyaml composes the nodes and
    PyYAML's constructor, which walks them in Python with much machinery, is
    mostly bypassed: mappings, lists and strings are built here directly, any
    other scalar by PyYAML's own constructor, and a document with anything else
    (tags, merge keys, a key that is not a string, a key given twice, recursive
    aliases) by PyYAML's constructor whole, errors included.
    """
    plain = _plain_text_document(text)
    if plain is not None:
        return plain
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        try:
            return _construct(loader, node, {})
        except _Unusual:
            return loader.construct_document(node)
    finally:
        loader.dispose()


_NODE_PROPERTY = re.compile(r"[\s,\[{][!&*]")
"""What may be a tag, an anchor or an alias (or prose that looks like one)."""


def _may_have_node_properties(text: str) -> bool:
    if "!" not in text and "&" not in text and "*" not in text:
        return False  # most files: no regular expression search at all
    return text[:1] in "!&*" or _NODE_PROPERTY.search(text) is not None


def _plain_text_document(text: str) -> dict[str, Any] | None:
    """The mapping in ``text`` if it holds only mappings, lists and strings, else None.

    ryaml parses with libyaml's grammar, as PyYAML does, but its result is only
    taken when PyYAML's would be the same: a mapping whose keys and values are
    strings, lists and mappings, where no string is one that PyYAML, unquoted,
    would read as another type (``yes``, ``1:20``, ``~``, a date, ``<<``...:
    such a file, quoted or not, goes to PyYAML), in a document with nothing that
    may be a tag, an anchor or an alias, and no key given twice. Anything else,
    errors included, is left to PyYAML (None).
    """
    if _may_have_node_properties(text):
        return None
    try:
        data = ryaml.loads(text)
    except (ValueError, RecursionError):  # a key given twice, a syntax error...: PyYAML says
        return None
    return data if type(data) is dict and _strings_only(data) else None


_TYPED_PLAIN: dict[str, tuple[re.Pattern[str], ...]] = {
    first: tuple(pattern for _, pattern in resolvers)
    for first, resolvers in _StrictLoader.yaml_implicit_resolvers.items()
}
"""By first character, the patterns of the plain scalars PyYAML reads as another type."""


def _strings_only(data: dict[str, Any]) -> bool:
    """Whether ``data`` is made of strings PyYAML reads as strings, in lists and mappings."""
    pending: list[Any] = [data]
    while pending:
        value = pending.pop()
        kind = type(value)
        if kind is str:
            patterns = _TYPED_PLAIN.get(value[:1])
            if patterns is not None and any(pattern.match(value) for pattern in patterns):
                return False
        elif kind is dict:
            pending += value  # the keys
            pending += value.values()
        elif kind is list:
            pending += value
        else:
            return False
    return True


def _construct(loader: _StrictLoader, node: yaml.Node, built: dict[int, Any]) -> Any:
    tag = node.tag
    if isinstance(node, yaml.ScalarNode):
        return node.value if tag == _STR_TAG else loader.construct_object(node)
    key = id(node)
    if key in built:  # an alias: the same object, as PyYAML gives
        if built[key] is None:
            raise _Unusual  # a node that contains itself
        return built[key]
    built[key] = None
    result: Any
    if tag == _SEQ_TAG:
        result = [_construct(loader, item, built) for item in node.value]
    elif tag == _MAP_TAG:
        result = {}
        for key_node, value_node in node.value:
            if key_node.tag != _STR_TAG or not isinstance(key_node, yaml.ScalarNode):
                raise _Unusual
            name = key_node.value
            if name in result:
                raise _Unusual  # PyYAML's construction says where
            result[name] = _construct(loader, value_node, built)
    else:
        raise _Unusual
    built[key] = result
    return result


class _BlockStyleDumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks (``|``), which people can edit."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockStyleDumper.add_representer(str, _represent_str)


def _loc_to_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int) or part == "[key]":
            path += f"[{part}]" if isinstance(part, int) else part
        else:
            path += f".{part}" if path else part
    return path


def validation_problems(error: ValidationError) -> list[str]:
    """One ``"field.path: reason"`` string per problem, e.g.
    ``"interaction_samples[1].assistant: Field required"``."""
    problems = []
    for detail in error.errors(include_url=False):
        reason = detail["msg"]
        if detail["type"] == "extra_forbidden":
            reason = "unknown field"
        path = _loc_to_path(detail["loc"])
        problems.append(f"{path}: {reason}" if path else reason)
    return problems


def _yaml_problem(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        reason = error.problem or "invalid YAML"
        if error.context:
            reason = f"{reason} ({error.context})"
        return f"YAML syntax error at line {mark.line + 1}, column {mark.column + 1}: {reason}"
    return f"YAML error: {error}"


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _parse(text: str, fmt: Literal["yaml", "json"], source: str) -> dict[str, Any]:
    data: Any
    if fmt == "json":
        try:
            data = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
        except json.JSONDecodeError as error:
            problem = f"JSON syntax error at line {error.lineno}, column {error.colno}: {error.msg}"
            raise PersonaFileError(source, [problem]) from None
        except ValueError as error:  # a duplicate key
            raise PersonaFileError(source, [f"JSON error: {error}"]) from None
    else:
        try:
            data = _load_yaml(text)
        except yaml.YAMLError as error:
            raise PersonaFileError(source, [_yaml_problem(error)]) from None
    if data is None:
        raise PersonaFileError(source, ["the file is empty; top level must be a mapping"])
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise PersonaFileError(source, [f"top level must be a mapping, not {kind}"])
    return data


def parse_persona_text(
    persona_id: str, text: str, *, source: str, fmt: Literal["yaml", "json"] = "yaml"
) -> Persona:
    """A persona from the text of a persona file.

    ``source`` is what errors name (a path, an upload's file name).

    Raises:
        PersonaFileError: the id is not a valid persona id, the text is not valid
            YAML/JSON, or the persona is invalid; one problem per field.
    """
    if not is_valid_persona_id(persona_id):
        problem = f"'{persona_id}' is not a valid persona id (expected {PERSONA_ID_PATTERN})"
        raise PersonaFileError(source, [problem])
    data = _parse(text, fmt, source)
    try:
        return Persona.from_data(persona_id, data)
    except ValidationError as error:
        raise PersonaFileError(source, validation_problems(error)) from None


def load_persona_file(path: str | os.PathLike[str]) -> Persona:
    """The persona in a ``.yaml``, ``.yml`` or ``.json`` file; its id is the file stem.

    Raises:
        PersonaFileError: the file cannot be read, is not UTF-8, has an unknown
            suffix or a file name that is not a persona id, or is invalid.
    """
    source = os.fspath(path)
    stem, suffix = os.path.splitext(os.path.basename(source))
    return _validate(source, stem, _read_data(source, stem, suffix))


def _check_name(source: str, stem: str, suffix: str) -> Literal["yaml", "json"]:
    fmt = PERSONA_SUFFIXES.get(suffix.lower())
    if fmt is None:
        expected = ", ".join(PERSONA_SUFFIXES)
        raise PersonaFileError(source, [f"unknown file type '{suffix}' (expected {expected})"])
    if not is_valid_persona_id(stem):
        problem = f"file name '{stem}' is not a valid persona id (expected {PERSONA_ID_PATTERN})"
        raise PersonaFileError(source, [problem])
    return fmt


def _read_data(source: str, stem: str, suffix: str) -> dict[str, Any]:
    """The parsed content of the persona file at ``source`` (not yet validated)."""
    fmt = _check_name(source, stem, suffix)
    try:
        with open(source, "rb", buffering=0) as file:  # one read, no buffer object
            raw = file.readall()
    except OSError as error:
        raise PersonaFileError(source, [f"cannot read the file: {error.strerror}"]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        problem = f"not UTF-8 text (byte {raw[error.start]:#04x} at offset {error.start})"
        raise PersonaFileError(source, [problem]) from None
    return _parse(text, fmt, source)


def _validate(source: str, stem: str, data: dict[str, Any]) -> Persona:
    try:
        return Persona.from_data(stem, data)
    except ValidationError as error:
        raise PersonaFileError(source, validation_problems(error)) from None


def persona_to_data(persona: Persona) -> dict[str, Any]:
    """The persona as file content: no ``id`` (the file name) or ``version``,
    no field that has its default value."""
    return persona.model_dump(mode="json", exclude={"id", "version"}, exclude_defaults=True)


def dump_persona_yaml(persona: Persona) -> str:
    """The persona as a YAML file; loading it gives back an equal persona."""
    return yaml.dump(
        persona_to_data(persona),
        Dumper=_BlockStyleDumper,
        sort_keys=False,
        allow_unicode=True,
        width=100,
    )
