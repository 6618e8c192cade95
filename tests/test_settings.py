from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from persona_agent.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def test_env_example_lists_every_setting() -> None:
    text = (REPO / ".env.example").read_text(encoding="utf-8")
    listed = set(re.findall(r"^#?\s*PERSONA_AGENT_([A-Z0-9_]+)=", text, re.MULTILINE))
    assert listed == {name.upper() for name in Settings.model_fields}


def test_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    assert settings.host == "127.0.0.1"
    assert settings.port == 8000
    assert settings.personas_dir == Path("personas")
    assert settings.llm_backend == "auto"
    assert settings.base_url == "http://127.0.0.1:8000"
    assert settings.resolved_database_url.endswith("/data/persona-agent.db")
    assert settings.resolved_database_url.startswith("sqlite+aiosqlite:///")
    assert settings.request_budget_model_calls == 100
    assert settings.request_budget_tool_calls == 100


def test_the_bundled_personas_are_examples_and_new_ones_go_to_the_data_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    default = Settings(_env_file=None)  # type: ignore[call-arg]
    assert default.writable_personas_dir == Path("data/personas")
    assert default.example_personas_dir == Path("personas")
    assert Settings(_env_file=None, data_dir=Path("state")).writable_personas_dir == Path(  # type: ignore[call-arg]
        "state/personas"
    )
    # Set, even to ./personas (in the environment, say): the user's own, written to.
    monkeypatch.setenv("PERSONA_AGENT_PERSONAS_DIR", "./personas")
    named = Settings(_env_file=None)  # type: ignore[call-arg]
    assert named.writable_personas_dir == Path("personas")
    assert named.example_personas_dir is None
    monkeypatch.delenv("PERSONA_AGENT_PERSONAS_DIR")
    # Any other directory is the user's own: written to itself, no examples beside it.
    own = Settings(_env_file=None, personas_dir=tmp_path / "mine")  # type: ignore[call-arg]
    assert own.writable_personas_dir == tmp_path / "mine"
    assert own.example_personas_dir is None
    # Both set: the persona directory is the examples, the user directory takes the writes.
    both = Settings(  # type: ignore[call-arg]
        _env_file=None, personas_dir=tmp_path / "mine", user_personas_dir=tmp_path / "user"
    )
    assert both.writable_personas_dir == tmp_path / "user"
    assert both.example_personas_dir == tmp_path / "mine"
    same = Settings(  # type: ignore[call-arg]
        _env_file=None, personas_dir=tmp_path / "mine", user_personas_dir=tmp_path / "mine"
    )
    assert same.example_personas_dir is None


def test_openai_variables_are_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://fallback/v1")
    assert Settings(_env_file=None).llm_api_key == "sk-fallback"  # type: ignore[call-arg]
    assert Settings(_env_file=None).llm_base_url == "http://fallback/v1"  # type: ignore[call-arg]
    monkeypatch.setenv("PERSONA_AGENT_LLM_API_KEY", "pa-key")
    monkeypatch.setenv("PERSONA_AGENT_LLM_BASE_URL", "http://primary/v1")
    assert Settings(_env_file=None).llm_api_key == "pa-key"  # type: ignore[call-arg]
    assert Settings(_env_file=None).llm_base_url == "http://primary/v1"  # type: ignore[call-arg]


def test_dotenv_file_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("PERSONA_AGENT_PORT=9123\n", encoding="utf-8")
    assert Settings().port == 9123


def test_public_base_url_is_normalized_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERSONA_AGENT_PUBLIC_BASE_URL", "https://hub.example.org/")
    assert Settings(_env_file=None).base_url == "https://hub.example.org"  # type: ignore[call-arg]
    monkeypatch.setenv("PERSONA_AGENT_PUBLIC_BASE_URL", "hub.example.org")
    with pytest.raises(ValidationError, match="public_base_url"):
        Settings(_env_file=None)  # type: ignore[call-arg]


def test_env_example_sets_each_setting_to_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The values .env.example writes out (its uncommented lines) are the defaults: a user
    who copies it to .env changes nothing (it had kept an old default of the embedder)."""
    text = (REPO / ".env.example").read_text(encoding="utf-8")
    written = re.findall(r"^PERSONA_AGENT_([A-Z0-9_]+)=(.*)$", text, re.MULTILINE)
    assert written
    for name, value in written:
        monkeypatch.setenv(f"PERSONA_AGENT_{name}", value)
    from_file = Settings(_env_file=None)  # type: ignore[call-arg]
    for name, _ in written:
        monkeypatch.delenv(f"PERSONA_AGENT_{name}")
    defaults = Settings(_env_file=None)  # type: ignore[call-arg]
    differing = [
        name
        for name, _ in written
        if getattr(from_file, name.lower()) != getattr(defaults, name.lower())
    ]
    assert differing == []
