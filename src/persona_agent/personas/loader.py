"""Reading and writing persona files: YAML, JSON, and character cards (JSON or PNG).

Every problem with a file becomes a :class:`PersonaFileError` that names the
file and, for each problem, the field and the reason: never a traceback. A JSON
file is a character card when it says so (``spec: chara_card_v2/v3``, or V1's
fields); a PNG file is one when it carries a card chunk.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from persona_agent.errors import PersonaFileError
from persona_agent.personas.formats.bounded import load_json, load_yaml
from persona_agent.personas.formats.charx import CARD_ENTRY, CharxAsset, CharxError, read_charx
from persona_agent.personas.formats.png import CleanImage, ImageError, clean_image, png_card_text
from persona_agent.personas.formats.tavern import (
    CardError,
    card_id,
    card_to_persona,
    looks_like_card,
)
from persona_agent.personas.model import (
    MAX_PROBLEMS,
    PERSONA_ID_RULE,
    Persona,
    is_valid_persona_id,
    validation_problems,
)
from persona_agent.security.limits import (
    DEFAULT_LIMITS,
    LimitExceeded,
    Limits,
    image_too_large,
    too_large,
)

__all__ = [
    "AVATAR_SUFFIX",
    "IMPORT_SUFFIXES",
    "MAX_PROBLEMS",
    "PERSONA_SUFFIXES",
    "NoCardError",
    "PersonaFile",
    "PersonaSource",
    "decode_persona_bytes",
    "dump_persona_yaml",
    "load_persona_file",
    "parse_persona_text",
    "persona_to_data",
    "read_persona",
    "validation_problems",
]

StoredFormat = Literal["yaml", "json", "png"]
"""The formats of the files of a persona directory."""
Format = Literal[StoredFormat, "charx"]

AVATAR_SUFFIX = ".avatar.png"
"""A persona's avatar image is written to ``{id}.avatar.png`` beside its file."""

PERSONA_SUFFIXES: dict[str, StoredFormat] = {
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".png": "png",
}
"""File name suffixes of persona files, and their formats."""

IMPORT_SUFFIXES: dict[str, Format] = {**PERSONA_SUFFIXES, ".charx": "charx"}
"""What an import or an upload takes: a persona file, or a CHARX (a V3 card and its assets
in a zip), stored as its card's JSON and its icon as the avatar."""


class NoCardError(PersonaFileError):
    """A PNG without a character card in it: an image (in the persona directory, an
    avatar), not a persona."""


@dataclass(frozen=True, slots=True)
class PersonaFile:
    """What a persona file holds: the persona, and the picture of a PNG card."""

    persona: Persona
    image: CleanImage | None = None
    """The card's image re-encoded without its text chunks: the persona's avatar."""
    source: PersonaSource | None = None
    """The file's text as stored (a PNG card's: the card JSON of its chunk)."""
    assets: tuple[CharxAsset, ...] = ()
    """A CHARX's embedded assets besides its icon (kept beside the persona by the hub)."""


@dataclass(frozen=True, slots=True)
class PersonaSource:
    """A persona file's bytes as written (comments, order and layout kept) and its format:
    ``yaml`` (a persona file) or ``json`` (a persona file or a character card)."""

    data: bytes
    fmt: Literal["yaml", "json"]

    @property
    def suffix(self) -> str:
        return f".{self.fmt}"


class _BlockStyleDumper(yaml.SafeDumper):
    """Writes multi-line strings as literal blocks (``|``), which people can edit."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockStyleDumper.add_representer(str, _represent_str)


def _yaml_problem(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        reason = error.problem or "invalid YAML"
        if error.context:
            reason = f"{reason} ({error.context})"
        return f"YAML syntax error at line {mark.line + 1}, column {mark.column + 1}: {reason}"
    return f"YAML error: {error}"


def _parse(text: str, fmt: Format, source: str, limits: Limits) -> dict[str, Any]:
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
        problem = f"'{persona_id}' is not a valid persona id ({PERSONA_ID_RULE})"
        raise PersonaFileError(source, [problem])
    return _validate(source, persona_id, _parse(text, fmt, source, limits), limits)


def read_persona(
    persona_id: str | None,
    raw: bytes,
    *,
    source: str,
    fmt: Format,
    limits: Limits = DEFAULT_LIMITS,
) -> PersonaFile:
    """A persona from the bytes of a file: YAML, JSON (a persona or a character card), a
    PNG character card (with its image) or a CHARX (a V3 card with its icon).

    The persona's id is ``persona_id``; if None, a persona file's is the stem of
    ``source`` and a card's is its name as a slug (:func:`card_id`).

    Raises:
        NoCardError: a PNG with no card in it.
        PersonaFileError: the id is not a persona id, the bytes are over the limits, not
            UTF-8, not valid YAML/JSON, not a readable PNG, not a V2/V3 card, or the
            persona is invalid; one problem per field.
    """
    if persona_id is not None and not is_valid_persona_id(persona_id):
        problem = f"'{persona_id}' is not a valid persona id ({PERSONA_ID_RULE})"
        raise PersonaFileError(source, [problem])
    if fmt == "png":
        return _read_png(persona_id, raw, source, limits)
    if fmt == "charx":
        return _read_charx(persona_id, raw, source, limits)
    data = _parse(decode_persona_bytes(raw, source, limits), fmt, source, limits)
    text = PersonaSource(raw, fmt)
    if fmt == "json" and looks_like_card(data):
        return PersonaFile(_from_card(persona_id, data, source, limits), source=text)
    if persona_id is None:
        persona_id = os.path.splitext(os.path.basename(source))[0]
        if not is_valid_persona_id(persona_id):
            problem = (
                f"file name '{persona_id}' is not a valid persona id "
                f"({PERSONA_ID_RULE}); rename the file or give the id"
            )
            raise PersonaFileError(source, [problem])
    return PersonaFile(_validate(source, persona_id, data, limits), source=text)


def _read_png(persona_id: str | None, raw: bytes, source: str, limits: Limits) -> PersonaFile:
    if len(raw) > limits.max_image_bytes:
        raise PersonaFileError(source, [str(image_too_large(len(raw), limits))])
    try:
        # The card's base64 may be 4/3 of the largest card; a chunk that inflates past
        # that is refused before it is held whole.
        found = png_card_text(raw, max_chars=limits.max_bytes * 4 // 3 + 4)
        if found is None:
            raise NoCardError(
                source, ["the PNG has no character card in it (no 'ccv3' or 'chara' text chunk)"]
            )
        chunk, text = found
        if len(text) > limits.max_bytes:
            raise PersonaFileError(
                source, [f"the card in the '{chunk}' chunk: {too_large(len(text), limits)}"]
            )
        data = _parse(text, "json", f"{source} ('{chunk}' chunk)", limits)
        image = clean_image(raw)
    except ImageError as error:
        raise PersonaFileError(source, [str(error)]) from None
    if not looks_like_card(data):
        raise PersonaFileError(source, [f"the '{chunk}' chunk is not a character card"])
    card = PersonaSource(text.encode("utf-8"), "json")
    return PersonaFile(_from_card(persona_id, data, source, limits), image, card)


def _read_charx(persona_id: str | None, raw: bytes, source: str, limits: Limits) -> PersonaFile:
    if len(raw) > limits.max_image_bytes:
        raise PersonaFileError(source, [str(image_too_large(len(raw), limits))])
    try:
        parts = read_charx(
            raw, max_card_bytes=limits.max_bytes, max_image_bytes=limits.max_image_bytes
        )
        data = _parse(decode_persona_bytes(parts.card, source, limits), "json", source, limits)
        image = clean_image(parts.icon) if parts.icon is not None else None
    except (CharxError, ImageError) as error:
        raise PersonaFileError(source, [str(error)]) from None
    if not looks_like_card(data):
        raise PersonaFileError(source, [f"{CARD_ENTRY} is not a character card"])
    card = PersonaSource(parts.card, "json")
    return PersonaFile(_from_card(persona_id, data, source, limits), image, card, parts.assets)


def _from_card(
    persona_id: str | None, data: dict[str, Any], source: str, limits: Limits
) -> Persona:
    try:
        return card_to_persona(persona_id or card_id(data), data, limits=limits)
    except CardError as error:
        raise PersonaFileError(source, error.problems) from None


def load_persona_file(path: str | os.PathLike[str], limits: Limits = DEFAULT_LIMITS) -> Persona:
    """The persona in a ``.yaml``, ``.yml``, ``.json`` or ``.png`` file; its id is the file
    stem. A persona's ``avatar`` must be a file beside it; a PNG card is its own avatar.

    Raises:
        NoCardError: a PNG with no card in it (an image, not a persona).
        PersonaFileError: the file cannot be read, is larger than the limit, is not
            UTF-8, has an unknown suffix or a file name that is not a persona id, or
            is invalid.
    """
    source = os.fspath(path)
    stem, suffix = os.path.splitext(os.path.basename(source))
    fmt = _check_name(source, stem, suffix)
    limit = limits.max_image_bytes if fmt == "png" else limits.max_bytes
    try:
        with open(source, "rb", buffering=0) as file:  # one read, no buffer object
            size = os.fstat(file.fileno()).st_size
            if size > limit:  # refused unread
                over = image_too_large(size, limits) if fmt == "png" else too_large(size, limits)
                raise PersonaFileError(source, [str(over)])
            raw = file.read(limit + 1)  # the file may grow meanwhile
    except OSError as error:
        raise PersonaFileError(source, [f"cannot read the file: {error.strerror}"]) from None
    persona = read_persona(stem, raw, source=source, fmt=fmt, limits=limits).persona
    if fmt == "png":
        return persona.model_copy(update={"avatar": os.path.basename(source)})
    own_avatar = f"{stem}{AVATAR_SUFFIX}"
    beside_own = os.path.join(os.path.dirname(source), own_avatar)
    if fmt == "json" and persona.avatar is None and os.path.isfile(beside_own):
        return persona.model_copy(update={"avatar": own_avatar})  # a card, its picture beside
    if persona.avatar is not None:
        beside = os.path.join(os.path.dirname(source), persona.avatar)
        if not os.path.isfile(beside):
            problem = f"avatar: no file '{persona.avatar}' beside the persona file"
            raise PersonaFileError(source, [problem])
    return persona


def _check_name(source: str, stem: str, suffix: str) -> Format:
    fmt = PERSONA_SUFFIXES.get(suffix.lower())
    if fmt is None:
        expected = ", ".join(PERSONA_SUFFIXES)
        raise PersonaFileError(source, [f"unknown file type '{suffix}' (expected {expected})"])
    if not is_valid_persona_id(stem):
        problem = f"file name '{stem}' is not a valid persona id ({PERSONA_ID_RULE})"
        raise PersonaFileError(source, [problem])
    return fmt


def _validate(source: str, persona_id: str, data: dict[str, Any], limits: Limits) -> Persona:
    try:
        return Persona.from_data(persona_id, data, limits=limits)
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
