"""The agents file: what it accepts, and how it names what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from persona_agent.collab.agents_file import (
    AgentAuth,
    AgentConfig,
    BreakerConfig,
    CatalogConfig,
    OAuth2ClientCredentials,
    load_agents_config,
    parse_agents_config,
)
from persona_agent.errors import ConfigError

CARD = "https://agents.example.com/.well-known/agent-card.json"


def test_defaults_and_environment_expansion(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(
        "agents:\n"
        "  scholar:\n"
        f"    card_url: {CARD}\n"
        "    auth: {api_key: '${SCHOLAR_KEY}'}\n"
        "  archive:\n"
        f"    card_url: {CARD}\n"
        "    auth:\n"
        "      oauth2:\n"
        "        token_url: https://login.example.com/token\n"
        "        client_id: hub\n"
        "        client_secret: '${SECRET:-dev-secret}'\n"
        "        scopes: [a2a]\n",
        encoding="utf-8",
    )
    config = load_agents_config(path, {"SCHOLAR_KEY": "k-123"})
    scholar = config.agents["scholar"]
    assert scholar.auth is not None
    assert scholar.auth.api_key is not None
    assert scholar.auth.api_key.get_secret_value() == "k-123"
    assert "k-123" not in repr(config)  # secrets stay out of logs
    assert (scholar.timeout, scholar.retries, scholar.card_refresh) == (60, 2, 300)
    assert (scholar.breaker.threshold, scholar.breaker.cool_down) == (5, 30)
    archive = config.agents["archive"].auth
    assert archive is not None
    assert archive.oauth2 is not None
    assert archive.oauth2.client_secret.get_secret_value() == "dev-secret"
    assert archive.oauth2.client_auth == "basic"


@pytest.mark.parametrize(
    ("agents", "said"),
    [
        ({"a__b": {"card_url": CARD}}, "agent name 'a__b'"),
        ({"x": {"card_url": "ftp://nope"}}, "agent 'x', field card_url: must start with http"),
        ({"x": {"card_url": CARD, "timeout": 0}}, "agent 'x', field timeout"),
        ({"x": {"card_url": CARD, "auth": {}}}, "agent 'x', field auth: give exactly one"),
        (
            {"x": {"card_url": CARD, "auth": {"bearer": "t", "api_key": "k"}}},
            "give exactly one of api_key, bearer or oauth2",
        ),
        ({"x": {"card_url": CARD, "auth": {"bearer": "${UNSET}"}}}, "UNSET is not set"),
        ({"x": {"card_url": CARD, "breaker": {"threshold": 0}}}, "field breaker.threshold"),
        ({"x": {"card": CARD}}, "agent 'x', field card_url: Field required"),
    ],
)
def test_a_bad_file_names_the_agent_and_the_field(agents: object, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_agents_config({"agents": agents}, {}, source="agents.yaml")
    assert refused.value.message.startswith("agents.yaml: ")
    assert said in refused.value.message


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read the agents file"):
        load_agents_config(tmp_path / "missing.yaml", {})
    broken = tmp_path / "broken.yaml"
    broken.write_text("agents: [", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml: not valid YAML"):
        load_agents_config(broken, {})


def test_the_example_agents_file_is_valid_and_shows_every_field() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "agents.yaml"
    variables = {
        "GRACE_HUB_KEY": "k",
        "LIBRARIAN_TOKEN": "t",
        "ARCHIVE_CLIENT_SECRET": "s",
        "LAB_TOKEN": "l",
    }
    config = load_agents_config(path, variables)
    assert set(config.agents) == {"grace", "librarian", "archive"}
    assert set(config.catalogs) == {"lab"}
    text = path.read_text(encoding="utf-8")
    shown = {
        *AgentConfig.model_fields,
        *BreakerConfig.model_fields,
        *AgentAuth.model_fields,
        *OAuth2ClientCredentials.model_fields,
        *CatalogConfig.model_fields,
    }
    missing = [name for name in shown if f"{name}:" not in text]
    assert not missing, f"examples/agents.yaml does not show {missing}"
