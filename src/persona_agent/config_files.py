"""What the hub's configuration files share (the MCP servers file, the agents file): read as
YAML or, named ``.json``, JSON; a mapping at the top level; ``${NAME}`` and
``${NAME:-default}`` in any string replaced from the environment (``$${`` is a literal
``${``); every error naming the file. A leaf.

:func:`load_config_file` does all of it; :func:`expand_config` what is left to do for
content already parsed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from persona_agent.errors import ConfigError

__all__ = ["expand_config", "load_config_file", "read_config_file"]

_VARIABLE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Where = Callable[[tuple[str | int, ...]], str]
"""Words for a location in the file (``server 'x', field env.TOKEN``)."""


def read_config_file(path: Path, what: str) -> Any:
    """The parsed content of ``path`` (``{}`` for an empty file).

    Raises:
        ConfigError: it cannot be read (``what``: the file's role, e.g. "the agents file")
            or parsed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read {what}: {error.strerror or error}") from None
    is_json = path.suffix.lower() == ".json"
    try:
        data = json.loads(text) if is_json else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"{path}: not valid {'JSON' if is_json else 'YAML'}: {reason}") from None
    return {} if data is None else data


def load_config_file(
    path: Path, what: str, environ: Mapping[str, str], where: Where, *, holding: str
) -> dict[str, Any]:
    """The content of the file at ``path`` (:func:`read_config_file`), its variables
    expanded from ``environ`` (:func:`expand_config`).

    Raises:
        ConfigError: as :func:`read_config_file` and :func:`expand_config` (the file is
            the source).
    """
    return expand_config(read_config_file(path, what), environ, str(path), where, holding=holding)


def expand_config(
    data: object, environ: Mapping[str, str], source: str, where: Where, *, holding: str
) -> dict[str, Any]:
    """``data``, a mapping, with every ``${NAME}`` of its strings (at any depth) replaced.

    Raises:
        ConfigError: ``data`` is not a mapping (``holding``: what it must hold, e.g.
            "a 'servers' key"), or a variable without a default is not set (or is empty),
            naming ``source`` and the location (``where``).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a mapping with {holding}")
    expanded: dict[str, Any] = _expand(data, environ, (), source, where)
    return expanded


def _expand(
    value: Any, environ: Mapping[str, str], loc: tuple[str, ...], source: str, where: Where
) -> Any:
    if isinstance(value, str):
        return _expand_string(value, environ, loc, source, where)
    if isinstance(value, dict):
        return {k: _expand(v, environ, (*loc, str(k)), source, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, environ, (*loc, str(i)), source, where) for i, v in enumerate(value)]
    return value


def _expand_string(
    text: str, environ: Mapping[str, str], loc: tuple[str, ...], source: str, where: Where
) -> str:
    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name is None:  # the escape "$${"
            return "${"
        value = environ.get(name)
        if value is not None and (value or default is None):
            return value
        if default is not None:
            return default
        raise ConfigError(f"{source}: {where(loc)}: environment variable {name} is not set")

    return _VARIABLE.sub(replace, text)
