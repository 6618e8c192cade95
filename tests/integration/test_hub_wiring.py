"""build_hub's decisions made once and handed to every part that needs them: whether
callers are identified reaches the conversations' quota (built with the engine, before the
A2A part that serves the same authenticator)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from persona_agent.hub.composition import build_hub
from tests.integration.conftest import BUNDLED, settings_of


@pytest.mark.parametrize("keys", ["", "a-key-of-alice"])
def test_anonymous_callers_count_in_the_quota_only_when_callers_are_identified(
    tmp_path: Path, keys: str
) -> None:
    personas = tmp_path / "personas"
    personas.mkdir()
    shutil.copy(BUNDLED / "socrates.yaml", personas)
    hub = build_hub(
        settings_of(
            personas_dir=personas,
            data_dir=tmp_path / "data",
            llm_base_url="http://127.0.0.1:9/v1",
            mcp_config=None,
            api_keys=keys,
        )
    )
    identified = hub.protection.authenticator.enabled
    assert identified is bool(keys)
    assert (hub.registry.services.auth is not None) is identified  # the A2A part's view
    assert hub.conversations.quota.limits.anonymous_is_a_caller is identified
