from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see none of the developer's or CI's LLM settings."""
    for name in list(os.environ):
        if name.startswith(("PERSONA_AGENT_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def local_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for the whole run: the embedded model's file is assembled into it once."""
    return tmp_path_factory.mktemp("models")
