"""The blocks that set variables (a deployment's settings, API keys, a database URL), run
with ``bash`` as written, each assignment on its own, and what they set read as ``serve``
reads it: :class:`~persona_agent.settings.Settings`, then the parts built from it (the
authenticator with its API keys and OIDC issuer, the database's driver).

Values the docs leave for the reader to choose are chosen here: a key shown as ``"..."``
is a made-up key of 32 characters, a ``sha256`` shown as ``"..."`` or ``<...>`` the hash
of one, and the keys file ``/etc/persona-agent/keys.yaml`` ("entries as above") a file of
the entries the docs show above it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import make_url

from persona_agent.hub.protection import build_authenticator
from persona_agent.security.api_keys import hash_key
from persona_agent.settings import Settings
from tests.docs.sandbox import Sandbox
from tests.docs.snippets import Snippet, claim, commands

ON_A_NETWORK = claim("README.md", "PERSONA_AGENT_AUDIT_LOG=/var/log/persona-agent/audit.jsonl")
DATABASE = claim("docs/deployment.md", "export PERSONA_AGENT_DATABASE_URL=")
KEYS = claim("docs/security.md", "# a comma-separated list: each key its own principal")
PRIVATE = claim("docs/security.md", "PERSONA_AGENT_API_KEYS_FILE=/etc/persona-agent/keys.yaml")
OIDC = claim("docs/security.md", "PERSONA_AGENT_OIDC_ISSUER=https://login.example.org")

MADE_UP_KEY = "a-key-the-reader-made-up-0123456"


def assigned(sandbox: Sandbox, command: str) -> dict[str, str]:
    """The ``PERSONA_AGENT_*`` variables ``command`` sets, as bash sets them."""
    ran = sandbox.run(f"set -a\n{command}\nenv -0").ok()
    pairs = (entry.partition("=") for entry in ran.stdout.split("\0") if entry)
    return {name: value for name, _, value in pairs if name.startswith("PERSONA_AGENT_")}


def filled(value: str) -> str:
    """A value with the docs' placeholders filled in (see the module docstring)."""
    value = value.replace('"key": "..."', f'"key": "{MADE_UP_KEY}"')
    return re.sub(r'"sha256": "(\.\.\.|<[^>]*>)"', f'"sha256": "{hash_key(MADE_UP_KEY)}"', value)


def name_of(settings: Settings, key: str) -> str | None:
    """The principal's name that ``key`` authenticates as, with the authenticator ``serve``
    builds from ``settings``."""
    principal = build_authenticator(settings).keys.match(key)
    return None if principal is None else principal.name


def settings_of(variables: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def each_assignment(sandbox: Sandbox, snippet: Snippet) -> list[dict[str, str]]:
    return [{k: filled(v) for k, v in assigned(sandbox, c).items()} for c in commands(snippet)]


def test_the_deployment_in_four_lines(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    variables: dict[str, str] = {}
    for one in each_assignment(sandbox, ON_A_NETWORK):
        variables |= one
    assert len(variables) == 4
    settings = settings_of(variables, monkeypatch)
    assert (settings.host, settings.a2a_access) == ("0.0.0.0", "authenticated")
    assert settings.audit_log == "/var/log/persona-agent/audit.jsonl"
    assert name_of(settings, "a-long-random-key-for-alice") == "key:alice"


def test_the_replicas_share_a_postgresql_url_and_a_public_url(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables = assigned(sandbox, DATABASE.text)
    settings = settings_of(variables, monkeypatch)
    url = make_url(settings.resolved_database_url)
    assert (url.get_backend_name(), url.get_driver_name()) == ("postgresql", "asyncpg")
    url.get_dialect()  # the driver is there: `uv sync --extra postgres`
    assert settings.base_url == "http://hub.example.org:8080"
    # the cards' gRPC interface names nginx's gRPC server, whatever the replica's own port
    assert settings.grpc_address(50051) == "hub.example.org:50050"


def test_api_keys_as_a_list_and_as_entries(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed, entries = each_assignment(sandbox, KEYS)
    settings = settings_of(listed, monkeypatch)
    for key in ("k3y-one-0123456789", "k3y-two-0123456789"):  # key:{first 12 hex of SHA-256}
        assert name_of(settings, key) == f"key:{hash_key(key)[:12]}"
    settings = settings_of(entries, monkeypatch)
    assert name_of(settings, MADE_UP_KEY) == "key:alice"  # the first entry that matches
    assert [entry["name"] for entry in json.loads(entries["PERSONA_AGENT_API_KEYS"])] == [
        "alice",
        "ci",
        "tutor",
    ]


def test_a_deployment_with_keys_in_a_file(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    variables: dict[str, str] = {}
    for one in each_assignment(sandbox, PRIVATE):
        variables |= one
    _, entries = each_assignment(sandbox, KEYS)
    keys_file = tmp_path / "keys.yaml"  # "entries as above"
    keys_file.write_text(yaml.safe_dump(json.loads(entries["PERSONA_AGENT_API_KEYS"])))
    assert variables["PERSONA_AGENT_API_KEYS_FILE"] == "/etc/persona-agent/keys.yaml"
    variables["PERSONA_AGENT_API_KEYS_FILE"] = str(keys_file)
    settings = settings_of(variables, monkeypatch)
    assert settings.base_url == "https://personas.example.org"
    authenticator = build_authenticator(settings)
    assert authenticator.default_access == "authenticated"
    assert len(authenticator.keys) == 3


def test_an_oidc_issuer_with_an_admin_key(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    variables: dict[str, str] = {}
    for one in each_assignment(sandbox, OIDC):
        variables |= one
    settings = settings_of(variables, monkeypatch)
    authenticator = build_authenticator(settings)
    assert authenticator.oidc is not None
    assert authenticator.oidc.discovery_url == (
        "https://login.example.org/realms/main/.well-known/openid-configuration"
    )
    principal = authenticator.keys.match(MADE_UP_KEY)
    assert principal is not None
    assert principal.scopes == {"personas:read", "personas:write"}
