from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see none of the developer's or CI's LLM settings."""
    for name in list(os.environ):
        if name.startswith(("PERSONA_AGENT_", "OPENAI_")):
            monkeypatch.delenv(name)
