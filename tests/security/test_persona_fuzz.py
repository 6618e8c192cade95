"""Fuzzing the persona doors of a real ``persona-agent serve``: whatever the body (nesting,
aliases, huge scalars, odd encodings, binary), the answer is 2xx or 4xx, never 5xx, and
the process keeps running."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.personas import BUNDLED, persona_data
from tests.security import UPLOAD
from tests.servers.hub_process import hub_process

API = "/api/v1/personas"
TIMEOUT = 60  # generous: the machine may be busy; a hub that hangs still fails the test
FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module")
def hub(root: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    shutil.copytree(BUNDLED, root / "personas")
    offline = {"LLM_BASE_URL": "http://127.0.0.1:9/v1", "LLM_API_KEY": "unused"}
    with hub_process(root / "personas", root / "data", MAX_PERSONA_BYTES="65536", **offline) as (
        url,
        process,
    ):
        yield url, process


def assert_answered(reply: httpx.Response, process: subprocess.Popen[str]) -> None:
    assert reply.status_code < 500, reply.text
    assert process.poll() is None


# Fragments persona files are made of, and the hostile ones: brackets, anchors, aliases,
# tags, merge keys, long runs.
fragments = st.sampled_from(
    [
        "name: ",
        "description: ",
        "[",
        "]",
        "{",
        "}",
        "- ",
        "\n",
        "  ",
        "&a ",
        "*a",
        "&b [*a, *a, *a, *a]",
        "<<: *a\n",
        "!!binary ",
        "!!bool ",
        "!!timestamp ",
        "!!set ",
        "maybe",
        "2001-13-45",
        "9" * 5000,
        "&a name: &a ",
        "!!python/object:os.system ",
        "? ",
        ": ",
        "---\n",
        '"',
        "'",
        "x" * 5000,
        "[" * 200,
        "\ufeff",
        "\x00",
        "é",
    ]
)
yaml_texts = st.lists(fragments | st.text(max_size=20), max_size=40).map("".join)
encodings = st.sampled_from(["utf-8", "utf-16", "utf-32", "latin-1", "utf-8-sig"])


@FUZZ
@given(text=yaml_texts, encoding=encodings, suffix=st.sampled_from([".yaml", ".yml", ".json"]))
def test_uploads_never_break_the_hub(
    hub: tuple[str, subprocess.Popen[str]], text: str, encoding: str, suffix: str
) -> None:
    url, process = hub
    raw = text.encode(encoding, errors="replace")
    files = {"file": (f"fuzzed{suffix}", raw, "application/octet-stream")}
    assert_answered(
        httpx.post(f"{url}{API}/upload?replace=true", files=files, headers=UPLOAD, timeout=TIMEOUT),
        process,
    )


@FUZZ
@given(raw=st.binary(max_size=2048))
def test_binary_uploads_and_bodies_never_break_the_hub(
    hub: tuple[str, subprocess.Popen[str]], raw: bytes
) -> None:
    url, process = hub
    files = {"file": ("binary.yaml", raw, "application/octet-stream")}
    assert_answered(
        httpx.post(f"{url}{API}/upload", files=files, headers=UPLOAD, timeout=TIMEOUT), process
    )
    headers = {"Content-Type": "application/json"}
    assert_answered(
        httpx.post(f"{url}{API}", content=raw, headers=headers, timeout=TIMEOUT), process
    )


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=30,
)


def nested(depth: int, kind: str) -> str:
    return (
        ("[" if kind == "list" else '{"a": ') * depth
        + "1"
        + ("]" if kind == "list" else "}") * depth
    )


@FUZZ
@given(
    field=st.sampled_from(["name", "description", "language_style", "knowledge_domains", "x"]),
    value=json_values,
    depth=st.integers(min_value=0, max_value=3000),
    kind=st.sampled_from(["list", "map"]),
    method=st.sampled_from(["POST", "PUT"]),
    content_type=st.sampled_from(["application/json", "application/problem+json", None]),
)
def test_json_bodies_never_break_the_hub(
    hub: tuple[str, subprocess.Popen[str]],
    field: str,
    value: Any,
    depth: int,
    kind: str,
    method: str,
    content_type: str | None,
) -> None:
    url, process = hub
    body = {"id": "fuzzed-json", **persona_data(), field: value}
    text = json.dumps(body)
    if depth:
        text = text[:-1] + f', "deep": {nested(depth, kind)}}}'
    path = API if method == "POST" else f"{API}/fuzzed-json"
    headers = {"Content-Type": content_type} if content_type else {}
    assert_answered(
        httpx.request(method, f"{url}{path}", content=text, headers=headers, timeout=TIMEOUT),
        process,
    )


def test_after_the_fuzzing_the_hub_still_serves(hub: tuple[str, subprocess.Popen[str]]) -> None:
    url, process = hub
    assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
    assert httpx.get(f"{url}/a2a/socrates/.well-known/agent-card.json").status_code == 200
    assert process.poll() is None


@pytest.fixture(autouse=True)
def _no_stray_temporary_files(root: Path) -> Iterator[None]:
    yield
    assert not list((root / "personas").glob(".*.tmp"))
