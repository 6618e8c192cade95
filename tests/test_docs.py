"""What the README and docs tell a new user holds: the example persona is where they say,
the install lines work, the licence is the one the package declares, and no example
server takes the hub's own port."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import pytest

from persona_agent.personas.loader import load_persona_file
from persona_agent.settings import Settings

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted([REPO / "README.md", REPO / ".env.example", *(REPO / "docs").glob("*.md")])
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
"""Of https://www.apache.org/licenses/LICENSE-2.0.txt, the licence's standard text."""


def doc_id(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_the_example_persona_is_valid_and_every_mention_is_its_path() -> None:
    example = REPO / "examples" / "grace-hopper.yaml"
    persona = load_persona_file(example)  # as `serve`, `validate` and an upload read it
    assert (persona.id, persona.name) == ("grace-hopper", "Grace Hopper")
    assert persona.tools.allow is None  # nothing a fresh hub lacks: no MCP server, no model
    assert persona.model.name is None
    mentions = 0
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for found in re.finditer(r"[\w./@-]*grace-hopper\.(?:yaml|yml)", text):
            mentions += 1
            assert found.group().endswith("examples/grace-hopper.yaml"), (doc_id(path), found)
    assert mentions >= 4


@pytest.mark.parametrize("path", DOCS, ids=doc_id)
def test_install_lines_never_name_pypis_persona_agent(path: Path) -> None:
    """``persona-agent`` on PyPI is someone else's project: the hub comes from its
    repository (``uv sync``, ``--extra postgres`` for PostgreSQL)."""
    text = path.read_text(encoding="utf-8")
    wrong = re.findall(
        r"(?:pip|pipx|uv pip|uv tool) install\s+['\"]?persona-agent|uv add persona", text
    )
    assert wrong == [], doc_id(path)


def test_the_postgres_hint_of_the_database_error_is_an_install_line_that_works() -> None:
    source = (REPO / "src" / "persona_agent" / "db" / "async_engine.py").read_text(encoding="utf-8")
    assert "uv sync --extra postgres" in source
    assert "install 'persona-agent" not in source
    deployment = (REPO / "docs" / "deployment.md").read_text(encoding="utf-8")
    assert "uv sync --extra postgres" in deployment


def test_the_licence_is_apache_2_as_the_package_declares() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    licence = (REPO / "LICENSE").read_bytes()
    assert hashlib.sha256(licence).hexdigest() == APACHE_2_SHA256


HUB_PATHS = (
    *("/a2a", "/api/v1", "/.well-known", "/healthz", "/readyz", "/metrics"),
    *("/docs", "/redoc", "/openapi.json", "/console", "/mcp", "/v1"),
)


@pytest.mark.parametrize("path", DOCS, ids=doc_id)
def test_no_example_server_listens_on_the_hubs_port(path: Path) -> None:
    """A URL on the hub's default port is the hub's (its base URL or one of its paths),
    never an LLM server's, a webhook's or an MCP server's a reader would start beside it."""
    port = Settings.model_fields["port"].default
    text = path.read_text(encoding="utf-8")
    for found in re.finditer(rf"https?://[\w.\-\[\]:]+?:{port}(/[^\s`'\")|<>]*)?", text):
        rest = found.group(1) or ""
        assert rest in ("", "/") or rest.startswith(HUB_PATHS), (doc_id(path), found.group())
