"""The MCP servers file: formats, ``${ENV}`` expansion, and errors that name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from persona_agent.errors import ConfigError
from persona_agent.tools.config import MCPConfig, ServerConfig, load_mcp_config, parse_mcp_config

YAML_CONFIG = """
servers:
  weather:
    command: python
    args: ["-m", "weather_mcp", "--units=${UNITS:-metric}"]
    env: {API_KEY: "${WEATHER_KEY}"}
    cwd: null
    timeout: 30
  search:
    url: "http://${SEARCH_HOST}:9000/mcp"
    headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
    timeout: 10
"""

ENV = {"WEATHER_KEY": "k-123", "SEARCH_HOST": "127.0.0.1", "SEARCH_TOKEN": "t-456"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_file_with_both_transports_and_expansion(tmp_path: Path) -> None:
    config = load_mcp_config(write(tmp_path, "mcp.yaml", YAML_CONFIG), ENV)

    weather, search = config.servers["weather"], config.servers["search"]
    assert weather.transport == "stdio"
    assert weather.command == "python"
    assert weather.args == ["-m", "weather_mcp", "--units=metric"]  # the default
    assert weather.env == {"API_KEY": "k-123"}
    assert weather.timeout == 30
    assert search.transport == "http"
    assert search.url == "http://127.0.0.1:9000/mcp"
    assert search.headers == {"Authorization": "Bearer t-456"}
    assert search.timeout == 10


def test_json_file(tmp_path: Path) -> None:
    data = {"servers": {"local": {"command": "srv", "args": ["${MODE}"]}}}
    config = load_mcp_config(write(tmp_path, "mcp.json", json.dumps(data)), {"MODE": "stdio"})
    assert config.servers["local"].args == ["stdio"]
    assert config.servers["local"].timeout is None  # the toolbox default applies


def test_set_variable_wins_over_default_and_escape_is_literal() -> None:
    data = {
        "servers": {
            "s": {"command": "srv", "args": ["${UNITS:-metric}", "${EMPTY:-fallback}", "$${HOME}"]}
        }
    }
    config = parse_mcp_config(data, {"UNITS": "imperial", "EMPTY": ""})
    assert config.servers["s"].args == ["imperial", "fallback", "${HOME}"]


def test_missing_variable_names_file_server_field_and_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "mcp.yaml", YAML_CONFIG)
    env = {k: v for k, v in ENV.items() if k != "WEATHER_KEY"}
    with pytest.raises(ConfigError) as caught:
        load_mcp_config(path, env)
    message = caught.value.message
    assert str(path) in message
    assert "'weather'" in message
    assert "env.API_KEY" in message
    assert "WEATHER_KEY" in message


def test_missing_variable_in_a_header() -> None:
    data = {"servers": {"search": {"url": "http://x/mcp", "headers": {"X-Key": "${NOPE}"}}}}
    with pytest.raises(ConfigError, match=r"'search'.*headers\.X-Key.*NOPE"):
        parse_mcp_config(data, {})


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ({"command": "srv", "url": "http://x/mcp"}, "exactly one of command"),
        ({"args": ["x"]}, "exactly one of command"),
        ({"url": "http://x/mcp", "args": ["x"]}, "apply to a command"),
        ({"command": "srv", "headers": {"A": "b"}}, "apply to a url"),
        ({"url": "ftp://x/mcp"}, "http:// or https://"),
        ({"command": "srv", "timeout": 0}, "timeout"),
        ({"command": "srv", "comand": "typo"}, "comand"),
    ],
)
def test_invalid_server_names_file_and_field(
    tmp_path: Path, server: dict[str, object], expected: str
) -> None:
    path = write(tmp_path, "mcp.json", json.dumps({"servers": {"broken": server}}))
    with pytest.raises(ConfigError) as caught:
        load_mcp_config(path, {})
    assert str(path) in caught.value.message
    assert "servers.broken" in caught.value.message
    assert expected in caught.value.message


@pytest.mark.parametrize("name", ["two__parts", "with space", "dotted.name", ""])
def test_server_names_are_checked(name: str) -> None:
    with pytest.raises(ConfigError, match="server name"):
        parse_mcp_config({"servers": {name: {"command": "srv"}}}, {})


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match="cannot read"):
        load_mcp_config(missing, {})
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_mcp_config(write(tmp_path, "bad.yaml", "servers: [unclosed"), {})
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_mcp_config(write(tmp_path, "bad.json", "{"), {})
    with pytest.raises(ConfigError, match="mapping"):
        load_mcp_config(write(tmp_path, "list.yaml", "- a\n- b\n"), {})


def test_empty_file_means_no_servers(tmp_path: Path) -> None:
    assert load_mcp_config(write(tmp_path, "empty.yaml", ""), {}).servers == {}


def test_model_validate_from_a_dict() -> None:
    config = MCPConfig.model_validate(
        {"servers": {"local": {"command": "srv"}, "remote": {"url": "https://h/mcp"}}}
    )
    assert config.servers["local"] == ServerConfig(command="srv")
    assert config.servers["remote"].transport == "http"
