"""Hostile persona files through every door of a real ``persona-agent serve``: the REST
JSON body, the upload, the watched directory, start-up, ``validate`` and ``import-persona``.
Each is refused with an error that names the file (or the body) and the limit, and the hub
keeps serving.

Before the limits: 60 KB of nested brackets crashed the process in libyaml's composer,
2 KB gave a 500 (``RecursionError``), and 100 KB of aliases expanded into 200 MB.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.personas import BUNDLED, persona_data, write_yaml
from tests.security import OFFLINE_LLM, UPLOAD
from tests.servers.hub_process import hub_process

API = "/api/v1/personas"
DEEP = "[" * 60_000  # 60 KB: libyaml's composer recursed until the stack ran out
NESTED = "a: " + "[" * 1_000 + "]" * 1_000 + "\n"  # 2 KB: RecursionError in PyYAML
DEPTH_LIMIT = "nested more than 32 deep (PERSONA_AGENT_MAX_PERSONA_DEPTH)"
EXPANDED_LIMIT = "aliases expanded, the content is larger than 1048576 bytes"


def alias_bomb() -> str:
    """About 100 KB of YAML that stands for some 200 MB once its aliases are expanded."""
    lines = ["a0: &a0 [" + ", ".join(["lol" * 30] * 9) + "]"]
    for level in range(1, 9):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n" + "pad: " + "x" * 90_000 + "\n"


HOSTILE = {"deep": DEEP, "nested": NESTED, "bomb": alias_bomb()}
PROBLEMS = {"deep": DEPTH_LIMIT, "nested": DEPTH_LIMIT, "bomb": EXPANDED_LIMIT}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """One hub process for the tests whose requests are all refused (a process takes
    seconds of CPU to start): none changes it, and each ends by checking it still serves."""
    root = tmp_path_factory.mktemp("persona-input")
    shutil.copytree(BUNDLED, root / "personas")
    with hub_process(root / "personas", root / "data", WATCH_PERSONAS="true", **OFFLINE_LLM) as (
        url,
        process,
    ):
        yield url, process


def still_serving(url: str) -> None:
    assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
    card = httpx.get(f"{url}/a2a/socrates/.well-known/agent-card.json")
    assert card.json()["name"] == "Socrates"


def test_the_upload_refuses_each_hostile_file_naming_it_and_the_limit(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = hub
    for name, text in HOSTILE.items():
        files = {"file": (f"{name}.yaml", text.encode(), "application/yaml")}
        reply = httpx.post(f"{url}{API}/upload", files=files, headers=UPLOAD, timeout=30)
        assert reply.status_code == 422, reply.text
        (problem,) = reply.json()["detail"]
        assert problem["msg"].startswith(f"{name}.yaml: ")
        assert PROBLEMS[name] in problem["msg"]
        still_serving(url)


def test_an_upload_over_the_size_limit_is_refused_before_it_is_read_whole(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = hub
    # A file upload may be as large as a PNG card; a persona file in it is held to its own
    # limit, and refused naming it.
    files = {"file": ("big.yaml", b"name: " + b"x" * (1200 * 1024), "application/yaml")}
    reply = httpx.post(f"{url}{API}/upload", files=files, headers=UPLOAD, timeout=30)
    assert reply.status_code == 422
    assert "PERSONA_AGENT_MAX_PERSONA_BYTES" in reply.json()["detail"][0]["msg"]
    # An upload over the image limit is refused from its length, none of it read.
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(
            f"POST {API}/upload HTTP/1.1\r\nHost: {host}\r\nX-Requested-With: t\r\n"
            "Content-Type: multipart/form-data; boundary=x\r\n"
            f"Content-Length: {17 * 1024 * 1024}\r\n\r\n".encode()
        )
        received = b""
        while chunk := connection.recv(65536):  # the hub closes the connection after it
            received += chunk
        answer = received.decode()
    assert answer.startswith("HTTP/1.1 413")
    assert "PERSONA_AGENT_MAX_IMAGE_BYTES" in answer

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused as the bytes arrive
        for _ in range(20):
            yield b"x" * 65_536

    headers = {"Content-Type": "application/json"}
    reply = httpx.post(f"{url}{API}", content=chunks(), headers=headers, timeout=30)
    assert reply.status_code == 413
    assert "more than the limit of" in reply.json()["detail"]
    still_serving(url)


def test_json_bodies_too_large_or_too_deep_are_refused(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = hub
    big = {"id": "big", **persona_data(description="x" * (2 * 1024 * 1024))}
    for method, path in (("POST", API), ("PUT", f"{API}/socrates")):
        reply = httpx.request(method, f"{url}{path}", json=big, timeout=30)
        assert reply.status_code == 413
        assert "PERSONA_AGENT_MAX_PERSONA_BYTES" in reply.json()["detail"]

    deep = '{"id": "deep", "name": ' + "[" * 5_000 + "]" * 5_000 + "}"
    # FastAPI parses a body without a Content-Type as JSON too.
    for content_type in ("application/json", "application/merge-patch+json", None):
        headers = {"Content-Type": content_type} if content_type else {}
        for method, path in (("POST", API), ("PUT", f"{API}/socrates")):
            reply = httpx.request(method, f"{url}{path}", content=deep, headers=headers)
            assert reply.status_code == 422, (content_type, reply.text)
            detail = reply.json()["detail"]
            assert detail == f"The request body: lists and mappings are {DEPTH_LIMIT}"
    still_serving(url)


def test_json_bodies_python_cannot_read_or_of_many_problems_get_short_4xx_answers(
    hub: tuple[str, subprocess.Popen[str]],
) -> None:
    url, _ = hub
    long_number = '{"id": "numbers", "name": ' + "9" * 5_000 + "}"
    headers = {"Content-Type": "application/json"}
    reply = httpx.post(f"{url}{API}", content=long_number, headers=headers)
    assert reply.status_code == 422
    assert reply.json()["detail"].startswith("The request body: Exceeds the limit (4300 digits)")
    # Python's json reads NaN, JSON has none; echoed back in a 422, it was a 500.
    not_json = '{"id": "nan", "name": "N", "description": NaN}'
    reply = httpx.post(f"{url}{API}", content=not_json, headers=headers)
    assert reply.status_code == 422
    assert reply.json()["detail"] == "The request body: NaN is not a JSON value (RFC 8259)"

    unknown = {f"field{number}": 1 for number in range(50_000)}  # 0.9 MB of unknown fields
    reply = httpx.post(f"{url}{API}", json={"id": "many", **persona_data(), **unknown})
    assert reply.status_code == 422
    problems = reply.json()["detail"]
    assert len(problems) == 21
    assert problems[-1]["msg"] == f"and {50_000 - 20} more problems"
    assert len(reply.content) < 10_000
    still_serving(url)


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 120) -> None:
    """Poll ``condition`` (across processes there is no event to await) for ``seconds`` at
    most (a safety bound against a hang, not a timing)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds}s for {what}"
        time.sleep(0.05)


def test_hostile_files_in_the_watched_directory_are_rejected_and_the_rest_goes_live(
    tmp_path: Path, personas_dir: Path
) -> None:
    with hub_process(personas_dir, tmp_path / "data", WATCH_PERSONAS="true", **OFFLINE_LLM) as (
        url,
        process,
    ):
        for name, text in HOSTILE.items():
            (personas_dir / f"{name}.yaml").write_text(text, encoding="utf-8")
        # Written last: once it is served, the watcher has seen the others (it takes a
        # batch of changes in file-name order, and a later batch after an earlier one).
        write_yaml(personas_dir / "zeno.yaml", persona_data(name="Zeno"))

        def zeno_served() -> bool:
            return httpx.get(f"{url}/a2a/zeno/.well-known/agent-card.json").status_code == 200

        wait_until(zeno_served, "the watcher to serve zeno.yaml")
        still_serving(url)
        for name in HOSTILE:
            assert httpx.get(f"{url}/a2a/{name}/.well-known/agent-card.json").status_code == 404
        process.terminate()
        output = process.communicate(timeout=30)[0]
    for name in HOSTILE:
        assert f"{personas_dir / name}.yaml: " in output
    assert DEPTH_LIMIT in output
    assert EXPANDED_LIMIT in output
    assert "Traceback" not in output


def run_cli(*command: str, data_dir: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """``persona-agent *command`` in a fresh process, with only these settings."""
    environment = {"PATH": os.environ["PATH"], "PERSONA_AGENT_DATA_DIR": str(data_dir)}
    environment.update({f"PERSONA_AGENT_{key}": value for key, value in settings.items()})
    return subprocess.run(
        [sys.executable, "-m", "persona_agent.cli", *command],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_start_up_and_validate_report_the_hostile_file_and_do_not_crash(
    tmp_path: Path, personas_dir: Path, name: str
) -> None:
    bad = personas_dir / f"{name}.yaml"
    bad.write_text(HOSTILE[name], encoding="utf-8")
    data_dir = tmp_path / "data"
    elsewhere = tmp_path / "elsewhere"
    for done in (
        run_cli("validate", "-d", str(personas_dir), data_dir=data_dir),
        run_cli("validate", str(bad), data_dir=data_dir),
        run_cli("import-persona", str(bad), "-d", str(elsewhere), data_dir=data_dir),
        run_cli("serve", "--port", "0", "-d", str(personas_dir), data_dir=data_dir, **OFFLINE_LLM),
    ):
        assert done.returncode == 1, (done.args, done.returncode, done.stderr)  # not a signal
        assert f"{bad}: " in done.stderr
        assert PROBLEMS[name] in done.stderr
        assert "Traceback" not in done.stderr
    assert not elsewhere.exists() or not any(elsewhere.iterdir())  # nothing imported


def test_the_limits_are_settings(tmp_path: Path, personas_dir: Path) -> None:
    wide = write_yaml(personas_dir / "wide.yaml", persona_data(description="x" * 3000))
    data_dir = tmp_path / "data"
    assert run_cli("validate", str(wide), data_dir=data_dir).returncode == 0
    done = run_cli("validate", str(wide), data_dir=data_dir, MAX_PERSONA_BYTES="2048")
    assert done.returncode == 1
    assert "more than the limit of 2048 bytes (PERSONA_AGENT_MAX_PERSONA_BYTES)" in done.stderr
    nested = write_yaml(personas_dir / "nested.yaml", persona_data(extra=[[[["x"]]]]))
    done = run_cli("validate", str(nested), data_dir=data_dir, MAX_PERSONA_DEPTH="4")
    assert "nested more than 4 deep (PERSONA_AGENT_MAX_PERSONA_DEPTH)" in done.stderr


def test_a_json_file_nested_too_deep_is_refused(personas_dir: Path) -> None:
    bad = personas_dir / "deep.json"
    bad.write_text(json.dumps({"name": "x"})[:-1] + ', "a": ' + "[" * 50_000 + "}", "utf-8")
    done = run_cli("validate", str(bad), data_dir=personas_dir.parent / "data")
    assert done.returncode == 1
    assert f"{bad}: lists and mappings are {DEPTH_LIMIT}" in done.stderr
