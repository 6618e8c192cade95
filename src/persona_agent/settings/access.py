"""Settings of who may do what: API keys, OIDC, per-caller limits, push notifications,
the audit log, signed cards and the bounds on persona files.

A section of :class:`persona_agent.settings.Settings`, which is composed of them and read
once at the edge; each field is ``PERSONA_AGENT_<NAME>`` there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

__all__ = ["AccessSettings"]


class AccessSettings(BaseSettings):
    """Who may do what, and the bounds on what they send."""

    max_message_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest A2A request body accepted; a larger one gets a clear error."""
    api_keys: str = Field(default="", repr=False)
    """API keys: comma-separated, or a JSON list of ``{name, key | sha256, scopes, personas}``
    (docs/security.md). They guard ``/api/v1`` (none: reads open, writes from loopback only)
    and authenticate A2A callers."""
    api_keys_file: Path | None = None
    """A YAML or JSON file of API key entries, as the JSON list of ``api_keys``."""
    a2a_access: Literal["public", "authenticated"] = "public"
    """Who may talk to personas over A2A by default (a persona's ``access:`` overrides)."""
    oidc_issuer: str | None = None
    """An OpenID Connect issuer whose bearer tokens (JWT) authenticate callers."""
    oidc_audience: str | None = None
    """The ``aud`` a token must carry (required with an issuer)."""
    oidc_jwks_url: str | None = None
    """The issuer's key set; default: its discovery document's ``jwks_uri``."""
    rate_limit: int = Field(default=600, ge=0)
    """A2A requests a minute per caller (principal, or client address); 0: no limit."""
    max_running_tasks: int = Field(default=32, ge=0)
    """A caller's tasks being answered at once; 0: no limit."""
    limit_loopback: bool = False
    """Hold anonymous callers on this machine (a loopback client address: the console
    opened here, the terminal chat, scripts, benchmarks) to ``rate_limit`` and
    ``max_running_tasks`` too; by default they are not."""
    max_streams: int = Field(default=256, ge=0)
    """A caller's open streams (SendStreamingMessage, SubscribeToTask); 0: no limit."""
    stream_idle_seconds: float = Field(default=300.0, ge=0)
    """A stream (SendStreamingMessage, SubscribeToTask) with nothing to say this long is
    ended (the task goes on); 0: never."""
    push_notifications: bool = True
    """Declare and serve push notifications (webhooks of clients, guarded against SSRF)."""
    push_config_key: str | None = Field(default=None, repr=False)
    """A Fernet key (``Fernet.generate_key()``): push configs (webhook tokens and
    credentials) are encrypted with it in the database."""
    push_allowed_hosts: str = ""
    """Comma-separated hosts (``host`` or ``host:port``) a webhook may be on even though
    they are not public addresses, for local development (loopback is refused unless here)."""
    push_max_configs_per_task: int = Field(default=10, ge=1, le=1000)
    """Push-notification configs one task may have; one more is refused (InvalidParams)."""
    push_max_configs_per_caller: int = Field(default=100, ge=1)
    """Push-notification configs one caller (principal, or client address without keys) may
    have on tasks not yet finished; one more is refused (InvalidParams)."""
    push_queue_per_destination: int = Field(default=100, ge=1)
    """Notifications waiting for one webhook destination (``scheme://host:port``); more
    are dropped."""
    push_max_destinations: int = Field(default=64, ge=1, le=10_000)
    """Webhook destinations delivered to at once, each by a worker of its own; a
    notification for one more is dropped while they are all busy."""
    push_queue_bytes: int = Field(default=32 * 1024 * 1024, ge=64 * 1024)
    """Bytes of notifications waiting for delivery, all destinations together; more are
    dropped."""
    audit_log: str | None = None
    """Where the audit log's JSON lines go: a file path (appended to), or ``-`` (stdout)."""
    card_signing_key: Path | None = None
    """A PEM private key (RSA, EC or Ed25519): every persona's agent card is signed with it."""
    card_signing_key_id: str = "persona-agent-card"
    """The ``kid`` of card signatures (its public key is at ``/.well-known/jwks.json``)."""
    max_persona_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest persona file (and REST body, upload, or content with YAML aliases expanded),
    and largest persona text once its macros are expanded (docs/security.md)."""
    max_persona_depth: int = Field(default=32, ge=4, le=256)
    """Deepest nesting of lists and mappings in a persona file or REST body."""
    max_image_bytes: int = Field(default=16 * 1024 * 1024, ge=64 * 1024)
    """Largest PNG character card or avatar image (file or upload)."""
    max_lore_entries: int = Field(default=5000, ge=1)
    """Most entries in a persona's lorebook (a card's ``character_book``)."""
    card_png_cache_bytes: int = Field(default=32 * 1024 * 1024, ge=0)
    """Memory kept for exported PNG cards (``GET .../card?as=png``), by persona version;
    ``0``: none kept (each export encodes its image again)."""

    @property
    def push_allowed_host_list(self) -> list[str]:
        return [host.strip() for host in self.push_allowed_hosts.split(",") if host.strip()]
