"""A new user at the command line: a bad setting and a port in use are said plainly, and
``persona-agent new`` starts a persona file."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from persona_agent.cli import app
from persona_agent.personas.loader import load_persona_file

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture
def personas_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "personas"
    shutil.copytree(REPO / "personas", directory)
    return directory


def clean_environ(**settings: str) -> dict[str, str]:
    """This process's environment without any persona-agent or OpenAI setting, plus
    ``settings`` (``PERSONA_AGENT_*`` names)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERSONA_AGENT_", "OPENAI_"))}
    return {**env, **settings}


@pytest.mark.parametrize(
    ("environ", "arguments", "expected"),
    [
        (
            {"PERSONA_AGENT_PORT": "eighty"},
            ["list-personas"],
            "PERSONA_AGENT_PORT: Input should be a valid integer",
        ),
        (
            {"PERSONA_AGENT_PUBLIC_BASE_URL": "ftp://hub.example"},
            ["list-personas"],
            "PERSONA_AGENT_PUBLIC_BASE_URL: must start with http:// or https://",
        ),
        ({}, ["serve", "--port", "70000"], "--port: Input should be less than or equal to 65535"),
        (
            {},
            ["agent-card", "--base-url", "hub.example"],
            "--base-url: must start with http:// or https://",
        ),
    ],
)
def test_a_bad_setting_names_the_variable_or_option_the_user_set(
    personas_dir: Path, environ: dict[str, str], arguments: list[str], expected: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "persona_agent.cli", *arguments, "-d", str(personas_dir)],
        env=clean_environ(**environ),
        cwd=personas_dir.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("Invalid settings:\n"), result.stderr
    assert expected in result.stderr
    for problem in result.stderr.splitlines()[1:]:  # never pydantic's field names
        assert problem.startswith(("  PERSONA_AGENT_", "  --")), problem
    for pydantic_only in ("errors.pydantic.dev", "Value error", "Traceback"):
        assert pydantic_only not in result.stderr


@pytest.fixture
def port_in_use() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        yield taken.getsockname()[1]


def test_a_port_in_use_is_reported_before_anything_loads(
    tmp_path: Path, personas_dir: Path, port_in_use: int
) -> None:
    """With nothing configured, the hub would load its embedded model first: a port in use
    is said at once instead, with the option that picks another."""
    data = tmp_path / "data"
    result = subprocess.run(
        [sys.executable, "-m", "persona_agent.cli", "serve", "--port", str(port_in_use)],
        env=clean_environ(
            PERSONA_AGENT_PERSONAS_DIR=str(personas_dir), PERSONA_AGENT_DATA_DIR=str(data)
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert f"port {port_in_use} is already in use on 127.0.0.1" in result.stderr
    assert f"--port {port_in_use + 1}" in result.stderr
    assert not data.exists()  # no database opened, no model file assembled


def test_new_writes_a_valid_persona_with_every_section(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    written = runner.invoke(app, ["new", "Grace Hopper", "-d", str(directory)])
    assert written.exit_code == 0, written.output
    path = directory / "grace-hopper.yaml"
    assert f"Wrote {path}" in written.output
    persona = load_persona_file(path)  # the loader `serve` uses
    assert (persona.id, persona.name) == ("grace-hopper", "Grace Hopper")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    sections = {"name", "description", "personal_background", "language_style"}
    sections |= {"knowledge_domains", "interaction_samples", "card", "model", "tools"}
    assert set(data) == sections
    assert persona.language_style is not None
    assert persona.language_style.sample_phrases
    assert persona.interaction_samples
    assert persona.card.examples
    assert sorted(p.name for p in directory.iterdir()) == ["grace-hopper.yaml"]  # no temp left
    checked = runner.invoke(app, ["validate", "-d", str(directory)])
    assert "1 valid, 0 invalid" in checked.output

    # Never over an existing persona, whatever its file's suffix.
    path.write_text(path.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    again = runner.invoke(app, ["new", "Grace Hopper", "-d", str(directory)])
    assert again.exit_code == 1
    assert "already exists" in again.output
    assert path.read_text(encoding="utf-8").endswith("# edited\n")
    shutil.copy(REPO / "examples" / "grace-hopper.yaml", directory / "amazing-grace.json")
    taken = runner.invoke(app, ["new", "Amazing Grace", "-d", str(directory)])
    assert taken.exit_code == 1
    assert "amazing-grace.json" in taken.output
    assert not (directory / "amazing-grace.yaml").exists()


@pytest.mark.parametrize(
    ("name", "persona_id"),
    [
        ('Dr. Who: the "Doctor" #1 - {Time} Lord', "dr-who-the-doctor-1-time-lord"),
        ("  Ada\n Lovelace ", "ada-lovelace"),
        ("Émilie du Châtelet", "emilie-du-chatelet"),
    ],
)
def test_new_takes_any_name(tmp_path: Path, name: str, persona_id: str) -> None:
    written = runner.invoke(app, ["new", name, "-d", str(tmp_path)])
    assert written.exit_code == 0, written.output
    persona = load_persona_file(tmp_path / f"{persona_id}.yaml")
    assert persona.name == " ".join(name.split())


def test_new_asks_for_an_id_when_the_name_makes_none(tmp_path: Path) -> None:
    refused = runner.invoke(app, ["new", "!!!", "-d", str(tmp_path)])
    assert refused.exit_code == 1
    assert "--id" in refused.output
    assert list(tmp_path.iterdir()) == []
    given = runner.invoke(app, ["new", "!!!", "--id", "bang", "-d", str(tmp_path)])
    assert given.exit_code == 0, given.output
    assert load_persona_file(tmp_path / "bang.yaml").name == "!!!"


def test_new_names_an_id_given_that_is_not_one_in_words(tmp_path: Path) -> None:
    refused = runner.invoke(app, ["new", "Space Case", "--id", "space case", "-d", str(tmp_path)])
    assert refused.exit_code == 1
    said = " ".join(refused.output.split())
    assert "--id 'space case' is not a persona id" in said
    assert "lowercase letters, digits and hyphens" in said
    assert said.endswith("--id space-case")
    assert "[a-z0-9]" not in said  # words, not the pattern
    assert list(tmp_path.iterdir()) == []
