"""Fixtures of the knowledge tests: the integration tests' hub and scripted fake LLM
(tests/integration/conftest.py)."""

from __future__ import annotations

from tests.integration.conftest import (
    fake_llm_server,
    hub_factory,
    llm,
    mcp_config_file,
    mcp_http_url,
    mcp_servers_file,
    personas_dir,
)

__all__ = [
    "fake_llm_server",
    "hub_factory",
    "llm",
    "mcp_config_file",
    "mcp_http_url",
    "mcp_servers_file",
    "personas_dir",
]
