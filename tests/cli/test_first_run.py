"""What a new user's first mistakes at the command line are told: a bad setting, a port in
use."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


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
    started = time.monotonic()
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
    assert time.monotonic() - started < 30
