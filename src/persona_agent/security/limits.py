"""How large what a caller or a persona file sends may be: the persona input limits, and
the errors that name the limit crossed and its setting (docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_LIMITS",
    "LimitExceeded",
    "Limits",
    "check_depth",
    "image_too_large",
    "nests_deeper",
    "too_deep",
    "too_large",
]


@dataclass(frozen=True, slots=True)
class Limits:
    """How large a persona file may be. Settings: ``PERSONA_AGENT_MAX_PERSONA_BYTES``,
    ``PERSONA_AGENT_MAX_PERSONA_DEPTH``, ``PERSONA_AGENT_MAX_IMAGE_BYTES``,
    ``PERSONA_AGENT_MAX_LORE_ENTRIES`` (docs/security.md)."""

    max_bytes: int = 1024 * 1024
    """The file's size, the size of its content once YAML aliases are expanded, and the
    size of its text once macros are (:mod:`persona_agent.personas.bounds`)."""
    max_depth: int = 32
    """Lists and mappings nested in one another (a persona needs 4)."""
    max_image_bytes: int = 16 * 1024 * 1024
    """A PNG character card or an avatar image (``PERSONA_AGENT_MAX_IMAGE_BYTES``); the card
    in it is text, held to ``max_bytes``."""
    max_lore_entries: int = 5000
    """Entries in a persona's lorebook (``PERSONA_AGENT_MAX_LORE_ENTRIES``)."""


DEFAULT_LIMITS = Limits()


class LimitExceeded(ValueError):
    """The text is over one of the :class:`Limits`; the message says which, and the setting."""


def too_large(size: int, limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        f"the file is {size} bytes, more than the limit of {limits.max_bytes} bytes "
        "(PERSONA_AGENT_MAX_PERSONA_BYTES)"
    )


def image_too_large(size: int, limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        f"the image is {size} bytes, more than the limit of {limits.max_image_bytes} bytes "
        "(PERSONA_AGENT_MAX_IMAGE_BYTES)"
    )


def too_deep(limits: Limits) -> LimitExceeded:
    return LimitExceeded(
        f"lists and mappings are nested more than {limits.max_depth} deep "
        "(PERSONA_AGENT_MAX_PERSONA_DEPTH)"
    )


def check_depth(data: Any, limits: Limits) -> None:
    """Raise :class:`LimitExceeded` if lists and mappings nest deeper than the limits."""
    if nests_deeper(data, limits.max_depth):
        raise too_deep(limits)


def nests_deeper(data: Any, max_depth: int) -> bool:
    """Whether lists and mappings in ``data`` nest deeper than ``max_depth`` (walked
    without recursion, so a hostile document cannot exhaust the stack)."""
    pending: list[tuple[Any, int]] = [(data, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth >= max_depth:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
