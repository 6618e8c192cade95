"""The persona model's field types: ids, slugs, text, topics, backgrounds, free keys and
avatar names, each with the validation of what a persona file may say there."""

from __future__ import annotations

import datetime
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator
from pydantic_core import PydanticCustomError

__all__ = [
    "AVATAR_PATTERN",
    "PERSONA_ID_PATTERN",
    "PERSONA_ID_RULE",
    "AvatarName",
    "Background",
    "FreeKeys",
    "PersonaId",
    "SampleDetail",
    "Text",
    "TextOrTexts",
    "Topics",
    "checked_persona_id",
    "is_valid_persona_id",
    "slugify",
]

PERSONA_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
PERSONA_ID_RULE = (
    "an id is lowercase letters, digits and hyphens, starting with a letter or a digit, "
    "at most 63 characters"
)
""":data:`PERSONA_ID_PATTERN` in words, for messages people read."""
"""A persona id: lowercase letters, digits and hyphens, at most 63 characters."""

AVATAR_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.(?i:png|jpe?g|webp|gif)$"
"""An avatar: the name of an image file beside the persona file (no directory part)."""

_ID_RE = re.compile(PERSONA_ID_PATTERN)
_AVATAR_RE = re.compile(AVATAR_PATTERN)
_NOT_SLUG_RE = re.compile(r"[^a-z0-9]+")


def is_valid_persona_id(value: str) -> bool:
    """Whether ``value`` is a persona id (``PERSONA_ID_PATTERN``, the whole string)."""
    return _ID_RE.fullmatch(value) is not None


def slugify(text: str) -> str:
    """Lowercase; every run of characters other than ``a-z0-9`` becomes one ``-``; trimmed."""
    return _NOT_SLUG_RE.sub("-", text.lower()).strip("-")


def _require_text(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("empty_text", "must not be empty")
    return value


def _require_topics(value: list[str]) -> list[str]:
    if not value:
        raise PydanticCustomError("no_topics", "at least one topic is required")
    return value


def _topics_as_list(value: Any) -> Any:
    """A domain given one topic as text (``politics: American politics``) has that topic."""
    return [value] if isinstance(value, str) else value


def _plain(value: Any) -> Any:
    """``value`` as JSON would hold it: YAML dates become ISO text, keys become text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def _text_or_texts(value: Any) -> Any:
    """For keys that take text or a list of text (``language_style``'s further keys)."""
    if isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    ):
        return value
    raise PydanticCustomError("text_or_list", "must be text or a list of text")


def _background(value: Any) -> Any:
    if isinstance(value, str):
        return _require_text(value)
    if isinstance(value, dict):
        if not value:
            raise PydanticCustomError("empty_background", "must not be empty")
        return _plain(value)
    raise PydanticCustomError(
        "background_type", "must be text, or a mapping of headings to text, lists or mappings"
    )


def _sample_detail(value: Any) -> Any:
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return value
    raise PydanticCustomError("sample_detail", "must be text or a number")


def _texts_ok(value: str | list[str]) -> str | list[str]:
    for item in [value] if isinstance(value, str) else value:
        _require_text(item)
    return value


Text = Annotated[str, AfterValidator(_require_text)]
"""A string with at least one non-whitespace character."""

Topics = Annotated[list[Text], BeforeValidator(_topics_as_list), AfterValidator(_require_topics)]

TextOrTexts = Annotated[str | list[str], BeforeValidator(_text_or_texts), AfterValidator(_texts_ok)]

Background = Annotated[str | dict[str, Any], BeforeValidator(_background)]
"""Text, or (the original persona-agent format) a mapping of any keys, values nested."""

SampleDetail = Annotated[str | int | float, BeforeValidator(_sample_detail)]
"""A further key of an interaction sample: text or a number (a YAML date becomes ISO text)."""


def _canonical(value: Any) -> Any:
    """``value`` as JSON would hold it, mappings in key order at every depth: the order of
    free keys means nothing, so it must not change a persona's version."""
    if isinstance(value, dict):
        return {str(key): _canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    return _plain(value)


FreeKeys = Annotated[dict[str, Any], AfterValidator(_canonical)]
"""A mapping of anything JSON can hold, in key order."""


def _avatar_name(value: str) -> str:
    if not _AVATAR_RE.fullmatch(value):
        raise PydanticCustomError(
            "avatar_name",
            "'{value}' is not an image file beside the persona file (a name such as "
            "ada.png: letters, digits, '.', '_' or '-', ending .png, .jpg, .jpeg, .webp or .gif)",
            {"value": value},
        )
    return value


AvatarName = Annotated[str, AfterValidator(_avatar_name)]


def checked_persona_id(value: str) -> str:
    """``value``, if it is a persona id; else the validation error that says so."""
    if not is_valid_persona_id(value):
        raise PydanticCustomError(
            "persona_id",
            "'{value}' is not a valid persona id ({rule})",
            {"value": value, "rule": PERSONA_ID_RULE},
        )
    return value


PersonaId = Annotated[str, AfterValidator(checked_persona_id)]
"""The id of another persona of the hub."""
