"""The agents file: A2A agents outside the hub that personas may call as tools.

A YAML or JSON file (``PERSONA_AGENT_AGENTS_FILE``, see docs/collaboration.md)::

    agents:
      scholar:
        card_url: https://agents.example.com/scholar/.well-known/agent-card.json
        auth:
          api_key: "${SCHOLAR_KEY}"        # or bearer: ..., or oauth2: {...}
        timeout: 60
        retries: 2
        breaker: {threshold: 5, cool_down: 30}
        bindings: [grpc, jsonrpc]          # optional: preferred first (default: the card's order)
    catalogs:
      lab:                                 # every A2A agent of an AI Catalog
        url: https://lab.example.com/.well-known/ai-catalog.json
        auth: {bearer: "${LAB_TOKEN}"}     # sent to the catalog, and to its agents at its origin
        prefix: lab                        # its agents are lab-{slug}: lab-ada-lovelace
        include: [ada-lovelace]            # or exclude: [...]; by default, all
        signed: true                       # refuse it unless its signature verifies

A persona names the agents it may call (``agents: [scholar]``); the model sees a tool
``agent__{name}`` for each. ``${NAME}`` and ``${NAME:-default}`` in any string value are
replaced from the environment given to :func:`load_agents_config` (``$${`` is a literal
``${``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from persona_agent.config_files import expand_config, load_config_file
from persona_agent.errors import ConfigError

__all__ = [
    "AGENT_NAME",
    "BINDING_NAMES",
    "AgentAuth",
    "AgentConfig",
    "AgentsConfig",
    "BreakerConfig",
    "CatalogConfig",
    "OAuth2ClientCredentials",
    "load_agents_config",
    "parse_agents_config",
]

AGENT_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,57}$")
"""An agent's name: its tool is ``agent__{name}``, 64 characters at most."""


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return value


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OAuth2ClientCredentials(_Section):
    """OAuth 2 client credentials (RFC 6749, section 4.4): the hub asks ``token_url`` for an
    access token and sends it as ``Authorization: Bearer``, until it expires."""

    token_url: str
    client_id: str = Field(min_length=1)
    client_secret: SecretStr
    scopes: list[str] = []
    audience: str | None = None
    """Sent as ``audience`` when the token endpoint wants one (Auth0, some others)."""
    client_auth: Literal["basic", "post"] = "basic"
    """How the client authenticates: HTTP Basic (``client_secret_basic``, the default) or
    in the form (``client_secret_post``)."""

    @field_validator("token_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value)


class AgentAuth(_Section):
    """One credential: ``api_key`` (with its ``header``), ``bearer``, or ``oauth2``."""

    api_key: SecretStr | None = None
    header: str | None = Field(default=None, min_length=1)
    """The API key's header; by default the one the agent's card names for its API-key
    scheme, else ``X-API-Key``."""
    bearer: SecretStr | None = None
    """A token sent as ``Authorization: Bearer``."""
    oauth2: OAuth2ClientCredentials | None = None
    hosts: list[str] = []
    """Further hosts (``host`` or ``host:port``) the credential may be sent to; by default
    only the one it was configured for: an agent's ``card_url`` host (any port: its gRPC
    port too), a catalog's own host and port."""

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        hosts = []
        for host in value:
            if not re.fullmatch(r"[A-Za-z0-9._-]+(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?", host):
                raise ValueError(f"{host!r} is not a host or host:port ([::1]:8443 for IPv6)")
            hosts.append(host.lower().replace("[", "").replace("]", ""))  # as URLs' hostname
        return hosts

    @model_validator(mode="after")
    def _one_credential(self) -> AgentAuth:
        given = [n for n in ("api_key", "bearer", "oauth2") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of api_key, bearer or oauth2")
        if self.header is not None and self.api_key is None:
            raise ValueError("header applies to an api_key")
        return self


class BreakerConfig(_Section):
    """When the hub stops calling a failing agent, and when it tries again."""

    threshold: int = Field(default=5, ge=1)
    """Consecutive failed attempts that open the breaker."""
    cool_down: float = Field(default=30.0, ge=0)
    """Seconds the breaker stays open before one trial call goes through."""


Binding = Literal["grpc", "jsonrpc", "http+json"]
"""A binding an outside agent may be called over, as the agents file names it."""

BINDING_NAMES: dict[str, str] = {"jsonrpc": "JSONRPC", "http+json": "HTTP+JSON", "grpc": "GRPC"}
"""The agents file's binding names, and the cards' (``protocolBinding``)."""


class AgentConfig(_Section):
    """One remote A2A agent."""

    card_url: str
    """Where its agent card is (e.g. ``https://host/.well-known/agent-card.json``)."""
    description: str | None = Field(default=None, min_length=1, max_length=1000)
    """What the model is told the agent does; by default, built from its card."""
    auth: AgentAuth | None = None
    timeout: float = Field(default=60.0, gt=0)
    """Seconds an attempt may take, from the request to the agent's last word."""
    connect_timeout: float = Field(default=5.0, gt=0)
    retries: int = Field(default=2, ge=0, le=10)
    """Further attempts after a transient failure (no connection, 429, 502, 503, 504)."""
    backoff: float = Field(default=0.5, ge=0)
    """Seconds before the first retry; doubled for each next one (with jitter)."""
    max_backoff: float = Field(default=10.0, ge=0)
    breaker: BreakerConfig = BreakerConfig()
    card_refresh: float = Field(default=300.0, ge=0)
    """Seconds a fetched card is used before it is checked again (``If-None-Match``)."""
    bindings: list[Binding] | None = Field(default=None, min_length=1)
    """The bindings to call it over, the preferred first (of those its card lists); by
    default the card's order among :data:`BINDING_NAMES`."""

    @field_validator("bindings")
    @classmethod
    def _distinct(cls, value: list[Binding] | None) -> list[Binding] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("name each binding once")
        return value

    @field_validator("card_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _http_url(value)


class CatalogConfig(_Section):
    """An AI Catalog whose A2A agents are all outside agents, named ``{prefix}-{slug}`` (the
    slug of each agent's display name: ``lab-ada-lovelace``)."""

    url: str
    """Where the catalog is (e.g. ``https://host/.well-known/ai-catalog.json``)."""
    auth: AgentAuth | None = None
    """Sent when reading the catalog, and to those of its agents at the catalog's own origin
    (or at the credential's ``hosts``)."""
    prefix: str | None = Field(default=None, pattern=r"^[a-zA-Z0-9_-]{1,40}$")
    """Its agents' names begin with ``{prefix}-`` (by default, the catalog's name)."""
    include: list[str] | None = None
    """Only these agents (their slugs); by default, all."""
    exclude: list[str] = []
    signed: bool = False
    """Refuse the catalog unless it is signed and verifies (a signed one is always checked)."""
    jwks_url: str | None = None
    """The key set of its signatures; by default ``/.well-known/jwks.json`` at its origin."""

    @field_validator("url", "jwks_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _http_url(value) if value is not None else None

    def agent(self, card_url: str) -> AgentConfig:
        """The configuration of one of its agents: its credential, default timeouts."""
        return AgentConfig(card_url=card_url, auth=self.auth)


class AgentsConfig(_Section):
    """Every remote agent, by name (``^[a-zA-Z0-9_-]{1,57}$``, without ``__``), and the
    catalogs that bring in more."""

    agents: dict[str, AgentConfig] = {}
    catalogs: dict[str, CatalogConfig] = {}

    @field_validator("catalogs")
    @classmethod
    def _catalog_names(cls, catalogs: dict[str, CatalogConfig]) -> dict[str, CatalogConfig]:
        for name, catalog in catalogs.items():
            if catalog.prefix is None and not re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", name):
                raise ValueError(
                    f"catalog name {name!r} must match ^[a-zA-Z0-9_-]{{1,40}}$ (or give prefix)"
                )
        return catalogs

    @field_validator("agents")
    @classmethod
    def _names(cls, agents: dict[str, AgentConfig]) -> dict[str, AgentConfig]:
        for name in agents:
            if not AGENT_NAME.match(name) or "__" in name:
                raise ValueError(
                    f"agent name {name!r} must match ^[a-zA-Z0-9_-]{{1,57}}$ and not contain '__'"
                )
        return agents


def load_agents_config(path: Path, environ: Mapping[str, str]) -> AgentsConfig:
    """Read the agents file at ``path`` (``.json``: JSON, else YAML), expanding ``${NAME}``.

    Raises:
        ConfigError: the file cannot be read or parsed, a variable is unset, or a field is
            invalid; the message names the file, the agent and the field.
    """
    data = load_config_file(path, "the agents file", environ, _where, holding=_HOLDING)
    return _validated(data, source=str(path))


def parse_agents_config(
    data: object, environ: Mapping[str, str], *, source: str = "agents file"
) -> AgentsConfig:
    """Validate already-parsed ``data``, expanding ``${NAME}`` from ``environ`` first.

    Raises:
        ConfigError: as :func:`load_agents_config`, naming ``source``.
    """
    return _validated(expand_config(data, environ, source, _where, holding=_HOLDING), source)


_HOLDING = "an 'agents' key"


def _validated(expanded: dict[str, Any], source: str) -> AgentsConfig:
    """The agents and catalogs of ``expanded`` (a file's content, its variables expanded).

    Raises:
        ConfigError: a field is invalid, naming ``source``, the agent and the field.
    """
    try:
        return AgentsConfig.model_validate(expanded)
    except ValidationError as error:
        problems = [
            f"{_where(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in error.errors()
        ]
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def _where(loc: tuple[str | int, ...]) -> str:
    """``agent 'scholar', field auth.api_key`` for a location under ``agents``."""
    if len(loc) > 2 and loc[0] in ("agents", "catalogs"):
        return f"{str(loc[0])[:-1]} {loc[1]!r}, field {'.'.join(str(p) for p in loc[2:])}"
    return ".".join(str(part) for part in loc) or "(top level)"
