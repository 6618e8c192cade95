"""Fixtures of the doc tests: the integration tests' hub, fake LLM and MCP servers
(tests/integration/conftest.py), and a sandbox to run snippets in (sandbox.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.sandbox import Sandbox
from tests.fakes.fake_llm import FakeLLM
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
    "llm_env",
    "mcp_config_file",
    "mcp_http_url",
    "mcp_servers_file",
    "personas_dir",
    "sandbox",
]


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "clone")


@pytest.fixture
def llm_env(llm: FakeLLM) -> dict[str, str]:
    """The settings that put the scripted fake LLM where the embedded model would answer."""
    return {
        "PERSONA_AGENT_LLM_BASE_URL": llm.base_url,
        "PERSONA_AGENT_LLM_API_KEY": "test-key",
        "PERSONA_AGENT_LLM_MAX_RETRIES": "0",
    }
