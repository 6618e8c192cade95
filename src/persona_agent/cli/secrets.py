"""Every secret the settings name, for the command line's log to redact wherever it shows."""

from __future__ import annotations

import re
from collections.abc import Mapping

from persona_agent.errors import ConfigError
from persona_agent.observe.logs import url_passwords
from persona_agent.settings import Settings

__all__ = ["configured_secrets"]

_SECRET_NAME = re.compile(r"(?i)key|token|secret|passw|credential|auth|cookie")
"""An MCP server's header or environment variable whose value is a secret."""


def configured_secrets(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    """Every secret the hub is configured with, for the log to redact wherever it shows:
    the API keys, the LLM key, the passwords of the database and LLM URLs, and the MCP
    servers' credentials (headers and environment variables named like one, the token of a
    ``Bearer TOKEN`` alone too, passwords in their URLs)."""
    from persona_agent.security.api_keys import keys_in_clear

    found = [
        *keys_in_clear(settings.api_keys, settings.api_keys_file),
        settings.llm_api_key or "",
        settings.push_config_key or "",
        *url_passwords(settings.database_url, settings.llm_base_url),
    ]
    if settings.mcp_config is None:
        return found
    from persona_agent.tools.config import load_mcp_config

    try:
        mcp = load_mcp_config(settings.mcp_config, environ)
    except ConfigError:
        return found  # create_app refuses to start, naming the problem
    for server in mcp.servers.values():
        for name, value in (*server.headers.items(), *server.env.items()):
            if _SECRET_NAME.search(name):
                found += [value, value.partition(" ")[2]]
        found += url_passwords(server.url)
    return found
