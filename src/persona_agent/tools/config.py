"""The MCP servers file: which servers the toolbox starts, and how.

A YAML or JSON file (``PERSONA_AGENT_MCP_CONFIG``, see docs/tools.md)::

    servers:
      weather:                          # stdio: a command the hub starts
        command: python
        args: ["-m", "weather_mcp"]
        env: {API_KEY: "${WEATHER_KEY}"}
        timeout: 30
      search:                           # streamable HTTP: a URL
        url: "http://127.0.0.1:9000/mcp"
        headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}

``${NAME}`` and ``${NAME:-default}`` in any string value are replaced from the
environment given to :func:`load_mcp_config` (``$${`` is a literal ``${``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from persona_agent.config_files import expand_config, load_config_file
from persona_agent.errors import ConfigError

__all__ = ["MCPConfig", "ServerConfig", "load_mcp_config", "parse_mcp_config"]

SERVER_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
"""A server name: it prefixes its tool names as ``server__tool``."""
RESERVED_NAMES = frozenset({"consult", "agent"})
"""Prefixes of the hub's own tools (other personas, outside agents)."""


class ServerConfig(BaseModel):
    """One MCP server: a stdio ``command`` or a streamable HTTP ``url`` (exactly one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: str | None = Field(default=None, min_length=1)
    """Program started as a stdio MCP server (looked up on ``PATH``)."""
    args: list[str] = []
    env: dict[str, str] = {}
    """Variables set for the command, on top of a minimal inherited set (``PATH``, ``HOME``...)."""
    cwd: str | None = None
    url: str | None = None
    """Streamable HTTP endpoint, e.g. ``http://127.0.0.1:9000/mcp``."""
    headers: dict[str, str] = {}
    """HTTP headers sent with every request (e.g. ``Authorization``)."""
    timeout: float | None = Field(default=None, gt=0)
    """Per-call timeout in seconds; ``None``: the toolbox default (PERSONA_AGENT_TOOL_TIMEOUT)."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd is not None):
            raise ValueError("args, env and cwd apply to a command, not to a url")
        if self.command is not None and self.headers:
            raise ValueError("headers apply to a url, not to a command")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"


class MCPConfig(BaseModel):
    """All MCP servers, by name (``^[a-zA-Z0-9_-]+$``, without ``__``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[str, ServerConfig] = {}

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in servers:
            if not SERVER_NAME.match(name) or "__" in name:
                raise ValueError(
                    f"server name {name!r} must match ^[a-zA-Z0-9_-]+$ and not contain '__'"
                )
            if name in RESERVED_NAMES:
                raise ValueError(
                    f"server name {name!r} is taken by the hub's own tools "
                    f"({name}__...: docs/collaboration.md); choose another"
                )
        return servers


def load_mcp_config(path: Path, environ: Mapping[str, str]) -> MCPConfig:
    """Read the servers file at ``path`` (``.json``: JSON, else YAML), expanding ``${NAME}``.

    Raises:
        ConfigError: the file cannot be read or parsed, a variable is unset, or a
            field is invalid; the message names the file and the field.
    """
    data = load_config_file(path, "the MCP config", environ, _where, holding=_HOLDING)
    return _validated(data, source=str(path))


def parse_mcp_config(
    data: object, environ: Mapping[str, str], *, source: str = "MCP config"
) -> MCPConfig:
    """Validate already-parsed config ``data``, expanding ``${NAME}`` from ``environ`` first.

    Raises:
        ConfigError: as :func:`load_mcp_config`, naming ``source``.
    """
    return _validated(expand_config(data, environ, source, _where, holding=_HOLDING), source)


_HOLDING = "a 'servers' key"


def _validated(expanded: dict[str, Any], source: str) -> MCPConfig:
    """The servers of ``expanded`` (a file's content, its variables expanded).

    Raises:
        ConfigError: a field is invalid, naming ``source`` and the field.
    """
    try:
        return MCPConfig.model_validate(expanded)
    except ValidationError as error:
        problems = [f"{_location(e['loc'])}: {e['msg']}" for e in error.errors()]
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def _where(loc: tuple[str | int, ...]) -> str:
    """``server 'x', field env.TOKEN`` for a location under ``servers``."""
    if len(loc) > 2:
        return f"server {loc[1]!r}, field {_location(loc[2:])}"
    return _location(loc)


def _location(loc: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"
