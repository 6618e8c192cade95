"""Every YAML block of the docs, read by what reads such a file in the hub: a persona
(whole, or a section shown on its own) by the persona loader, an MCP servers file by
``persona_agent.tools.config``, an agents file with catalogs by
``persona_agent.collab.agents_file``, a price file by ``persona_agent.observe.pricing``. A
YAML block that is none of these fails, until a test reads it for what it is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from persona_agent.a2a.cards import build_agent_card
from persona_agent.collab.agents_file import parse_agents_config
from persona_agent.errors import ConfigError
from persona_agent.observe.pricing import load_prices
from persona_agent.personas.loader import load_persona_file
from persona_agent.personas.model import Persona
from persona_agent.tools.config import load_mcp_config
from tests.docs.snippets import Snippet, all_snippets, claim

YAML = [claim(s.path, s.text) for s in all_snippets() if s.lang in ("yaml", "yml")]

PROMETHEUS = "scrape_configs"
"""A Prometheus configuration: test_hub_snippets.py scrapes the hub with it."""

LIBRECHAT = "endpoints"
"""LibreChat's ``librechat.yaml``: test_openai_snippets.py lists the personas with it."""

REQUIRED = {"name": "Doc Fragment", "description": "A persona around a section the docs show."}
"""What a persona section shown on its own is completed with: the required fields it
does not give itself."""

_SKILL_COMMENT = re.compile(r"#\s*skill(?: id)?:?\s+([a-z0-9-]+)")
_FILE_COMMENT = re.compile(r"^#\s*(?:\S+/)?([a-z0-9][a-z0-9-]*)\.(?:yaml|yml)\b")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


def kind(snippet: Snippet) -> str:
    """What the block is: ``persona``, ``fragment`` (persona sections), ``mcp``,
    ``agents`` (an agents file with catalogs), ``prices``, ``prometheus`` or ``librechat``."""
    data = yaml.safe_load(snippet.text)
    assert isinstance(data, dict), f"{snippet}: not a YAML mapping"
    if set(data) == {"servers"}:
        return "mcp"
    if PROMETHEUS in data:
        return "prometheus"
    if set(data) == {LIBRECHAT}:
        return "librechat"
    if "catalogs" in data and set(data) <= {"agents", "catalogs"}:
        return "agents"
    if all(
        isinstance(v, dict) and set(v) <= {"input", "output", "cached_input"} for v in data.values()
    ):
        return "prices"
    if {"name", "description"} <= set(data):
        return "persona"
    unknown = set(data) - set(Persona.model_fields)
    assert not unknown, (
        f"{snippet}: a YAML block no doc test knows (keys {sorted(unknown)}): teach "
        "tests/docs/test_yaml_snippets.py what reads it"
    )
    return "fragment"


def load_persona(snippet: Snippet, directory: Path) -> Persona:
    """The snippet as a persona file, read by the hub's loader: the file its first comment
    names (``# personas/donald-trump.yaml``), else one of the snippet's own; a section
    shown on its own is put after the required fields it lacks."""
    named = _FILE_COMMENT.match(snippet.text.lstrip())
    path = directory / f"{named.group(1) if named else 'doc-persona'}.yaml"
    given = yaml.safe_load(snippet.text)
    head = "".join(f"{key}: {value}\n" for key, value in REQUIRED.items() if key not in given)
    path.write_text(head + snippet.text, encoding="utf-8")
    return load_persona_file(path)


@pytest.mark.parametrize("snippet", YAML, ids=str)
def test_each_yaml_block_is_read_by_the_hub(snippet: Snippet, tmp_path: Path) -> None:
    found = kind(snippet)
    data: dict[str, Any] = yaml.safe_load(snippet.text)
    if found == "persona":
        persona = load_persona(snippet, tmp_path)
        card = build_agent_card(persona, "http://127.0.0.1:8000")
        skills = {skill.id for skill in card.skills}
        for said in _SKILL_COMMENT.findall(snippet.text):  # "# skill id: grace-hopper-..."
            assert said in skills, (snippet.where, said, skills)
    elif found == "fragment":
        persona = load_persona(snippet, tmp_path)
        for key in data:
            assert getattr(persona, key), (snippet.where, key)
    elif found == "mcp":
        path = tmp_path / "mcp.yaml"
        path.write_text(snippet.text, encoding="utf-8")
        variables = _VARIABLE.findall(snippet.text)
        config = load_mcp_config(path, {name: f"value-of-{name}" for name in variables})
        assert set(config.servers) == set(data["servers"])
        for server in config.servers.values():
            assert (server.command is None) != (server.url is None)
    elif found == "agents":
        variables = _VARIABLE.findall(snippet.text)
        agents = parse_agents_config(data, {name: f"value-of-{name}" for name in variables})
        assert set(agents.catalogs) == set(data["catalogs"])
    elif found == "prices":
        path = tmp_path / "prices.yaml"
        path.write_text(snippet.text, encoding="utf-8")
        table = load_prices(path)
        for model in data:
            assert table.price(model) is not None, (snippet.where, model)
    elif found == "librechat":
        for endpoint in data[LIBRECHAT]["custom"]:
            assert endpoint["baseURL"].endswith("/v1"), (snippet.where, endpoint)
    else:
        assert isinstance(data[PROMETHEUS], list), snippet.where


def test_the_price_file_prices_a_dated_model_by_its_prefix(tmp_path: Path) -> None:
    """docs/configuration.md: ``gpt-4o-mini`` prices the dated ``gpt-4o-mini-2024-07-18``."""
    snippet = next(s for s in YAML if s.path == "docs/configuration.md")
    path = tmp_path / "prices.yaml"
    path.write_text(snippet.text, encoding="utf-8")
    table = load_prices(path)
    assert table.price("gpt-4o-mini-2024-07-18") == table.price("gpt-4o-mini")
    assert table.price("gpt-4o-2024-08-06") == table.price("gpt-4o") != table.price("gpt-4o-mini")
    assert table.price("llama3.2") is None


def test_an_unset_variable_of_the_mcp_file_is_named_as_the_docs_say(tmp_path: Path) -> None:
    """docs/tools.md: the error that stops start-up when ``WEATHER_KEY`` is not set."""
    snippet = next(s for s in YAML if s.path == "docs/tools.md" and "weather" in s.text)
    path = tmp_path / "mcp.yaml"
    path.write_text(snippet.text, encoding="utf-8")
    said = re.search(r"`(mcp\.yaml: server 'weather'[^`]*)`", _doc("docs/tools.md"))
    assert said is not None
    with pytest.raises(ConfigError) as error:
        load_mcp_config(path, {"SEARCH_TOKEN": "t"})
    assert str(error.value).replace(str(path), "mcp.yaml") == said.group(1)


def _doc(path: str) -> str:
    from tests.docs.snippets import REPO

    return (REPO / path).read_text(encoding="utf-8")
