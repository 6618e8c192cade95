"""What the hub's configuration files share (the MCP servers file, the agents file): read as
YAML or, named ``.json``, JSON; ``${NAME}`` and ``${NAME:-default}`` in any string replaced
from the environment (``$${`` is a literal ``${``); every error naming the file. A leaf."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from persona_agent.errors import ConfigError

__all__ = ["expand_variables", "read_config_file"]

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


def expand_variables(value: Any, environ: Mapping[str, str], source: str, where: Where) -> Any:
    """``value`` with every ``${NAME}`` of its strings (at any depth) replaced.

    Raises:
        ConfigError: a variable without a default is not set (or is empty), naming
            ``source`` and the location (``where``).
    """
    return _expand(value, environ, (), source, where)


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
