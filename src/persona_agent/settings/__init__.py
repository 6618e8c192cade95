"""All settings of persona-agent, read once at the edge (``create_app(settings)``, the CLI).

Every field is ``PERSONA_AGENT_<NAME>`` in the environment or a ``.env`` file;
``.env.example`` lists them all. Inner classes take plain arguments instead.

:class:`Settings` is one class, composed of one section a concern (a module each, so a
setting is found by what it is about): :mod:`.site` (where the hub listens, what it
serves), :mod:`.stores` (what it keeps), :mod:`.thinking` (model, tools, budgets, outside
agents), :mod:`.recollection` (memory, knowledge), :mod:`.access` (who may do what),
:mod:`.media_limits` (images, documents, voice) and :mod:`.doors` (MCP, gRPC). What is
derived from settings of several sections is here.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic_settings import SettingsConfigDict

from persona_agent.settings.access import AccessSettings
from persona_agent.settings.doors import DoorSettings
from persona_agent.settings.media_limits import MediaSettings
from persona_agent.settings.recollection import RecollectionSettings
from persona_agent.settings.site import SiteSettings
from persona_agent.settings.stores import StoreSettings
from persona_agent.settings.thinking import ThinkingSettings

__all__ = ["Settings"]


class Settings(
    SiteSettings,
    StoreSettings,
    ThinkingSettings,
    RecollectionSettings,
    AccessSettings,
    MediaSettings,
    DoorSettings,
):
    """Every setting of the hub (the sections' fields together)."""

    model_config = SettingsConfigDict(
        env_prefix="PERSONA_AGENT_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
    )

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'persona-agent.db').resolve()}"

    @property
    def grpc_listen_host(self) -> str:
        """Where the gRPC server listens: ``grpc_host``, else ``host``."""
        return self.grpc_host or self.host

    def grpc_address(self, port: int) -> str:
        """The gRPC address cards say, the server listening on ``port``."""
        if self.grpc_public_address:
            return self.grpc_public_address
        host = urlsplit(self.base_url).hostname or "127.0.0.1"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
