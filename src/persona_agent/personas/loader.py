"""Reading and writing persona files (YAML or JSON).

Every problem with a file becomes a :class:`PersonaFileError` that names the
file and, for each problem, the field and the reason: never a traceback.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from persona_agent.errors import PersonaFileError
from persona_agent.personas.model import PERSONA_ID_PATTERN, Persona, is_valid_persona_id
from persona_agent.personas.parsing import (
    DEFAULT_LIMITS,
    LimitExceeded,
    Limits,
    load_json,
    load_yaml,
    too_large,
)

__all__ = [
    "MAX_PROBLEMS",
    "PERSONA_SUFFIXES",
    "decode_persona_bytes",
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


MAX_PROBLEMS = 20
"""Problems listed for one file at most; the rest are counted (a 1 MiB file of unknown
fields would otherwise give an error message many times its size)."""


def validation_problems(error: ValidationError) -> list[str]:
    """One ``"field.path: reason"`` string per problem, e.g.
    ``"interaction_samples[1].assistant: Field required"``; at most :data:`MAX_PROBLEMS`,
    then how many more there are."""
    details = error.errors(include_url=False, include_input=False, include_context=False)
    problems = []
    for detail in details[:MAX_PROBLEMS]:
        reason = detail["msg"]
        if detail["type"] == "extra_forbidden":
            reason = "unknown field"
        path = _loc_to_path(detail["loc"])
        problems.append(f"{path}: {reason}" if path else reason)
    if len(details) > MAX_PROBLEMS:
        problems.append(f"and {len(details) - MAX_PROBLEMS} more problems")
    return problems


def _yaml_problem(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        reason = error.problem or "invalid YAML"
        if error.context:
            reason = f"{reason} ({error.context})"
        return f"YAML syntax error at line {mark.line + 1}, column {mark.column + 1}: {reason}"
    return f"YAML error: {error}"


def _parse(text: str, fmt: Literal["yaml", "json"], source: str, limits: Limits) -> dict[str, Any]:
    data: Any
    try:
        data = load_json(text, limits) if fmt == "json" else load_yaml(text, limits)
    except LimitExceeded as error:
        raise PersonaFileError(source, [str(error)]) from None
    except json.JSONDecodeError as error:
        problem = f"JSON syntax error at line {error.lineno}, column {error.colno}: {error.msg}"
        raise PersonaFileError(source, [problem]) from None
    except yaml.YAMLError as error:
        raise PersonaFileError(source, [_yaml_problem(error)]) from None
    except ValueError as error:  # a duplicate key, NaN, a number of 5000 digits
        reason = str(error).split("; use sys.set_int_max_str_digits()")[0]
        raise PersonaFileError(source, [f"JSON error: {reason}"]) from None
    if data is None:
        raise PersonaFileError(source, ["the file is empty; top level must be a mapping"])
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise PersonaFileError(source, [f"top level must be a mapping, not {kind}"])
    return data


def decode_persona_bytes(raw: bytes, source: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """The text of a persona file's bytes: at most ``limits.max_bytes``, UTF-8 (a BOM is
    dropped).

    Raises:
        PersonaFileError: too large, or not UTF-8; the problem names the limit or the byte.
    """
    if len(raw) > limits.max_bytes:
        raise PersonaFileError(source, [str(too_large(len(raw), limits))])
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        problem = f"not UTF-8 text (byte {raw[error.start]:#04x} at offset {error.start})"
        raise PersonaFileError(source, [problem]) from None


def parse_persona_text(
    persona_id: str,
    text: str,
    *,
    source: str,
    fmt: Literal["yaml", "json"] = "yaml",
    limits: Limits = DEFAULT_LIMITS,
) -> Persona:
    """A persona from the text of a persona file.

    ``source`` is what errors name (a path, an upload's file name).

    Raises:
        PersonaFileError: the id is not a valid persona id, the text is over the
            limits or not valid YAML/JSON, or the persona is invalid; one problem
            per field.
    """
    if not is_valid_persona_id(persona_id):
        problem = f"'{persona_id}' is not a valid persona id (expected {PERSONA_ID_PATTERN})"
        raise PersonaFileError(source, [problem])
    return _validate(source, persona_id, _parse(text, fmt, source, limits))


def load_persona_file(path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> Persona:
    """The persona in a ``.yaml``, ``.yml`` or ``.json`` file; its id is the file stem.

    Raises:
        PersonaFileError: the file cannot be read, is larger than the limit, is not
            UTF-8, has an unknown suffix or a file name that is not a persona id, or
            is invalid.
    """
    source = os.fspath(path)
    stem, suffix = os.path.splitext(os.path.basename(source))
    fmt = _check_name(source, stem, suffix)
    try:
        with open(source, "rb", buffering=0) as file:  # one read, no buffer object
            size = os.fstat(file.fileno()).st_size
            if size > limits.max_bytes:  # refused unread
                raise PersonaFileError(source, [str(too_large(size, limits))])
            raw = file.read(limits.max_bytes + 1)  # the file may grow meanwhile
    except OSError as error:
        raise PersonaFileError(source, [f"cannot read the file: {error.strerror}"]) from None
    text = decode_persona_bytes(raw, source, limits)
    return _validate(source, stem, _parse(text, fmt, source, limits))


def _check_name(source: str, stem: str, suffix: str) -> Literal["yaml", "json"]:
    fmt = PERSONA_SUFFIXES.get(suffix.lower())
    if fmt is None:
        expected = ", ".join(PERSONA_SUFFIXES)
        raise PersonaFileError(source, [f"unknown file type '{suffix}' (expected {expected})"])
    if not is_valid_persona_id(stem):
        problem = f"file name '{stem}' is not a valid persona id (expected {PERSONA_ID_PATTERN})"
        raise PersonaFileError(source, [problem])
    return fmt


def _validate(source: str, persona_id: str, data: dict[str, Any]) -> Persona:
    try:
        return Persona.from_data(persona_id, data)
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
