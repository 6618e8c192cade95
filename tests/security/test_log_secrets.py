"""No secret in any log, at any level, nor in the database or an answer: a real
``persona-agent serve`` at ``PERSONA_AGENT_LOG_LEVEL=debug``, with API keys and an LLM
key in use and an LLM server that echoes credentials in its errors; then every file the
hub wrote is searched for each secret."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from persona_agent.cli import app
from persona_agent.observe.logs import REDACTED, redact, url_passwords
from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.personas import BUNDLED
from tests.servers.hub_process import hub_process
from tests.servers.oidc_issuer import AUDIENCE, OidcIssuer

API_KEY = "hub-key-9f8e7d6c5b4a3921"
LLM_KEY = "sk-llm-3c2b1a0f9e8d7c65"
UPSTREAM_TOKEN = "sk-upstream-org-77aa99bb"
NAMED_KEY = "named-key-5a4b3c2d1e0f9988"
SECRETS = [API_KEY, LLM_KEY, UPSTREAM_TOKEN]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def send(url: str, persona: str, text: str, headers: dict[str, str]) -> dict[str, object]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    reply = httpx.post(f"{url}/a2a/{persona}/", json=body, headers=headers, timeout=60)
    result: dict[str, object] = reply.json()["result"]["task"]
    return result


@pytest.fixture
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


def test_no_secret_reaches_a_log_the_database_or_a_client(
    tmp_path: Path, llm: FakeLLM, issuer: OidcIssuer
) -> None:
    token = issuer.token("alice", scopes=["a2a", "personas:read"])
    secrets = [*SECRETS, token, NAMED_KEY]
    personas_dir = tmp_path / "personas"
    shutil.copytree(BUNDLED, personas_dir)
    data_dir = tmp_path / "data"
    keys_file = tmp_path / "keys.yaml"
    keys_file.write_text(f"- name: named\n  key: {NAMED_KEY}\n", encoding="utf-8")
    settings = {
        "LOG_LEVEL": "debug",
        "API_KEYS": f"other-key-0000,{API_KEY}",
        "API_KEYS_FILE": str(keys_file),
        "OIDC_ISSUER": issuer.issuer,
        "OIDC_AUDIENCE": AUDIENCE,
        "A2A_ACCESS": "authenticated",
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": LLM_KEY,
        "LLM_MAX_RETRIES": "0",
    }
    keyed = {"Authorization": f"Bearer {API_KEY}", "X-API-Key": API_KEY, "A2A-Version": "1.0"}
    with hub_process(personas_dir, data_dir, **settings) as (url, process):
        # Debug output is plenty: drained as it comes, or the pipe fills and the hub waits.
        lines: list[str] = []
        assert process.stdout is not None
        drain = threading.Thread(target=lines.extend, args=(process.stdout,), daemon=True)
        drain.start()
        assert httpx.get(f"{url}/api/v1/personas", headers=keyed).status_code == 200
        wrong = {"X-API-Key": "wrong"}
        assert httpx.get(f"{url}/api/v1/personas", headers=wrong).status_code == 401

        llm.script(Reply("Know thyself."), Reply("By token."), Reply("By name."))
        done = send(url, "socrates", "Who are you?", keyed)
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
        v1 = {"A2A-Version": "1.0"}
        by_token = send(url, "socrates", "Token?", {"Authorization": f"Bearer {token}", **v1})
        assert by_token["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
        by_name = send(url, "socrates", "Named?", {"X-API-Key": NAMED_KEY, **v1})
        assert by_name["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
        refused = httpx.post(f"{url}/a2a/socrates/", json={}, headers={"X-API-Key": "bad-1"})
        assert refused.status_code == 401

        # Upstream errors that echo credentials: the hub's key, and one of its own.
        llm.script(Fail(401, f"Incorrect API key provided: {LLM_KEY}"))
        failed = send(url, "socrates", "Again?", keyed)
        llm.script(Fail(500, f"proxy said Authorization: Bearer {UPSTREAM_TOKEN}"))
        failed_again = send(url, "ada-lovelace", "Compute.", keyed)
        for task in (failed, failed_again):
            assert task["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]
            reason = task["status"]["message"]["parts"][0]["text"]  # type: ignore[index]
            assert "reference" in reason
            assert "Incorrect API key" not in reason
            assert "proxy said" not in reason
        process.terminate()
        process.wait(timeout=30)
        drain.join(timeout=30)
        output = "".join(lines)

    assert "DEBUG" in output  # the level took effect
    assert REDACTED in output  # something did try to log a secret
    assert "proxy said" in output  # the upstream's words are in the log, for the operator
    written = {"(the log)": output.encode()}
    written |= {str(p): p.read_bytes() for p in data_dir.rglob("*") if p.is_file()}
    assert any(name.endswith(".db") for name in written)
    for name, content in written.items():
        for secret in secrets:
            assert secret.encode() not in content, f"{secret[:12]}... in {name}"


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("headers={'authorization': 'Bearer abc123xyz', 'accept': '*/*'}", "'accept': '*/*'"),
        ("[(b'x-api-key', b'abc123xyz'), (b'host', b'h')]", "(b'host', b'h')"),
        ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "Authorization: "),
        ("GET https://user:abc123xyz@example.com/v1 200", "https://user:"),
        ("POST http://h/cb?token=abc123xyz&x=1", "&x=1"),
        ("api-key=abc123xyz", "api-key="),
        ("Cookie: session=abc123xyz", "Cookie: "),
        ("the key abc123xyz leaked", "the key "),
    ],
)
def test_redaction_takes_the_secret_and_keeps_the_rest(line: str, kept: str) -> None:
    redacted = redact(line, ["abc123xyz"])
    assert "abc123xyz" not in redacted
    assert "YWxhZGRpbjpvcGVuc2VzYW1l" not in redacted
    assert REDACTED in redacted
    assert kept in redacted


def test_url_passwords_are_secrets_and_user_names_are_not() -> None:
    urls = ("postgresql+asyncpg://hub:s%3Dcr3t@db/hub", "http://127.0.0.1/v1", None)
    assert url_passwords(*urls) == ["s%3Dcr3t", "s=cr3t"]


def test_invalid_settings_are_reported_without_their_values(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["validate", "-d", str(tmp_path)],
        env={"PERSONA_AGENT_PUBLIC_BASE_URL": f"https://admin:{API_KEY}@hub.example"},
    )
    assert result.exit_code == 2
    # Named as the user set it, with no pydantic "Value error," prefix (issue 24).
    assert "PERSONA_AGENT_PUBLIC_BASE_URL: must not contain credentials" in result.output
    assert "Value error" not in result.output
    assert API_KEY not in result.output
