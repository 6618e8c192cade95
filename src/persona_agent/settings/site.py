"""Settings of where the hub listens and what it serves: addresses, URLs, persona
directories, HTTP request limits, logs, metrics and the console.

A section of :class:`persona_agent.settings.Settings`, which is composed of them and read
once at the edge; each field is ``PERSONA_AGENT_<NAME>`` there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings

__all__ = ["SiteSettings"]


class SiteSettings(BaseSettings):
    """Where the hub listens and what it serves."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    public_base_url: str | None = None
    """Base URL that clients use to reach the hub (e.g. behind a proxy); cards are built from it."""
    provider_organization: str = "persona-agent"
    """Who runs the hub, as every agent card's ``provider`` says."""
    provider_url: str | None = None
    """The provider's web site on every card (default: the hub's base URL)."""
    personas_dir: Path = Path("./personas")
    """The persona files the hub serves. Left unset (``./personas``, the examples of the
    repository) it is read-only, and new personas go to ``user_personas_dir``; set, it is
    the user's own directory and written to itself."""
    data_dir: Path = Path("./data")
    user_personas_dir: Path | None = None
    """Where personas created or imported (REST, upload, console, ``import-persona``,
    ``new``) are written; default ``<data_dir>/personas`` while ``personas_dir`` is
    not set, else ``personas_dir`` itself (docs/personas.md#where-new-personas-go)."""
    request_head_timeout: float = Field(default=10.0, gt=0)
    """Seconds a client may take to send a request's head (method, path, headers)."""
    request_body_timeout: float = Field(default=30.0, gt=0)
    """Seconds a client may take to send a request's body, once its head has come."""
    max_head_bytes: int = Field(default=64 * 1024, ge=4096, le=16 * 1024 * 1024)
    """Largest request head (request line and headers), in bytes; a larger one is refused
    with 431 and the connection closed."""
    max_headers: int = Field(default=100, ge=16, le=10_000)
    """Most header fields a request may have; more are refused with 431."""
    shutdown_grace_seconds: float = Field(default=10.0, ge=0)
    """On SIGTERM, how long running tasks may take to finish before they are canceled."""
    cors_origins: str = ""
    """Comma-separated origins (``https://app.example.org``) whose web pages may call the
    hub (CORS); none by default."""
    allowed_hosts: str = ""
    """Comma-separated names (``hub.lan``; ``.example.org`` for it and every name under
    it) that a hub listening on loopback without API keys answers to, besides 127.0.0.1,
    [::1], localhost and the public base URL's host; other ``Host`` headers get 403 (DNS
    rebinding). ``*``: any name."""
    watch_personas: bool = True
    """Watch the persona directory: files added, edited or removed go live at once."""
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"
    """``json``: one JSON object per log line, with the request id, persona, task and
    trace id where known (docs/configuration.md#logs)."""
    metrics: bool = True
    """Prometheus metrics at ``/metrics`` (docs/observability.md); ``false``: not counted,
    and ``/metrics`` answers 404. Traces follow the standard ``OTEL_*`` environment."""
    console: bool = True
    """The web console at ``/console`` (docs/console.md): browse, chat with, edit and import
    personas in a browser, through the same A2A and REST endpoints as any client (so with
    the same credentials); ``false``: not served, and ``/`` is a page of links instead."""

    @field_validator("public_base_url", "provider_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if "@" in value.split("://", 1)[1].split("/", 1)[0]:
            # Every agent card carries this URL: credentials in it would reach every client.
            raise ValueError("must not contain credentials (user:password@)")
        return value

    @property
    def cors_origin_list(self) -> list[str]:
        return [
            origin.strip().rstrip("/") for origin in self.cors_origins.split(",") if origin.strip()
        ]

    @property
    def writable_personas_dir(self) -> Path:
        """The directory new and edited personas are written to."""
        if self.user_personas_dir is not None:
            return self.user_personas_dir
        if "personas_dir" in self.model_fields_set:  # set (environment, .env, option)
            return self.personas_dir
        return self.data_dir / "personas"

    @property
    def example_personas_dir(self) -> Path | None:
        """The read-only directory of example personas, listed beside the writable one;
        ``None`` when ``personas_dir`` is itself the writable directory."""
        writable = self.writable_personas_dir
        if writable.resolve() == self.personas_dir.resolve():
            return None
        return self.personas_dir

    @property
    def allowed_host_list(self) -> list[str]:
        """``allowed_hosts``, and the public base URL's host."""
        hosts = [host.strip() for host in self.allowed_hosts.split(",") if host.strip()]
        if self.public_base_url:
            hosts.append(urlsplit(self.public_base_url).hostname or "")
        return hosts

    @property
    def base_url(self) -> str:
        """Public base URL, or the listening address when none is set."""
        if self.public_base_url:
            return self.public_base_url
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"
