"""The snippets that start ``persona-agent serve``, run as written with ``bash`` in a
sandbox (sandbox.py) until the hub answers ``/healthz``, then talked to, then stopped
with SIGTERM (Ctrl-C's signal for a process in the background).

The environment adds what a reader's machine would have and a test cannot: a free port
(``PERSONA_AGENT_PORT``: the docs' hub is on the default 8000) and, where the docs leave
the embedded model answering, the scripted fake LLM (``PERSONA_AGENT_LLM_BASE_URL``). A
server a snippet names that the tests run themselves (an OTLP receiver, Ollama) is the
tests' own, its URL put in place of the docs' (:func:`rewrite`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import create_signature_verifier
from jwt import PyJWK

from tests.docs.not_run import NOT_RUN_COMMANDS
from tests.docs.sandbox import Sandbox, Server, free_port, rewrite
from tests.docs.snippets import REPO, claim, commands, expect, find, words
from tests.fakes.fake_llm import Fail, FakeLLM, Reply, ToolCalls
from tests.servers.otlp_receiver import OTLPReceiver, ReceivedSpan

QUICK_START = claim("README.md", "uv run persona-agent serve          # serves the bundled")
OTHER_LLM = claim("README.md", "export PERSONA_AGENT_LLM_BASE_URL=")
SDK_SPANS = claim("docs/configuration.md", "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=true")
LOCAL = claim("docs/local-model.md", "uv run persona-agent serve")
TRACES = claim("docs/observability.md", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318")
SPAN_TREE = claim("docs/observability.md", "(the caller's span, from its traceparent header)")
JSON_LOGS = claim("docs/observability.md", "PERSONA_AGENT_LOG_FORMAT=json uv run")
JSON_LINE = claim("docs/configuration.md", '"logger": "persona_agent.a2a.tasks.executor"')
LLM_FAILURE = claim("docs/security.md", "The language model server answered 503")
SIGNED = claim("docs/security.md", "openssl genpkey")
CHAT = "docs/chat.md"

TOOL = "echo"
"""The test MCP server's tool that stands for the docs' ``lookup`` in the span tree."""


def send(url: str, persona: str, text: str, **headers: str) -> dict[str, Any]:
    """A blocking JSON-RPC SendMessage; the task it answers."""
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    reply = httpx.post(
        f"{url}/a2a/{persona}/", json=body, headers={"A2A-Version": "1.0", **headers}, timeout=30
    )
    task: dict[str, Any] = reply.json()["result"]["task"]
    return task


def stream(url: str, persona: str, text: str) -> list[dict[str, Any]]:
    """A JSON-RPC SendStreamingMessage; every event's ``result``."""
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/a2a/{persona}/", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    ) as reply:
        for line in reply.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:])["result"])
    return events


def answer(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


@pytest.fixture
def port() -> int:
    return free_port()


def test_the_quick_start_serves_the_bundled_personas(
    sandbox: Sandbox, llm_env: dict[str, str], port: int
) -> None:
    serve, chat, tests = expect(
        QUICK_START, "uv run persona-agent serve", "uv run persona-agent chat socrates", "uv run"
    )
    bundled = re.search(r"The bundled personas are ([^.]+)\.", (REPO / "README.md").read_text())
    assert bundled is not None
    names = re.split(r", | and ", bundled.group(1).replace("\n", " "))
    with sandbox.serving(serve, port=port, env={**llm_env, "PERSONA_AGENT_PORT": str(port)}) as hub:
        listed = httpx.get(f"{hub.url}/a2a/personas").json()
        console = httpx.get(f"{hub.url}/console", follow_redirects=True)
    assert sorted(p["name"] for p in listed) == sorted(names)
    assert console.status_code == 200
    assert console.headers["content-type"].startswith("text/html")
    assert f"Serving {len(names)} persona(s) at {hub.url}/a2a/{{id}}/" in hub.stderr
    assert f"Web console: {hub.url}/console/" in hub.stderr
    # A default start warns of nothing: it says in one line that it is open to this
    # machine alone, and how to close it.
    assert "Open to this machine: no API keys" in hub.stderr
    assert "PERSONA_AGENT_API_KEYS" in hub.stderr
    assert "WARNING" not in hub.stderr, hub.stderr
    # A fresh data directory: its schema is created, in one line of ours, without the
    # migration tool's own lines (issue 35: seven alembic INFO lines at start).
    assert "Database schema migrated from nothing to " in hub.stderr
    assert "alembic" not in hub.stderr.lower()
    # `chat socrates` is the first command of docs/chat.md, which test_client_snippets.py runs.
    chat_md = find(CHAT, "uv run persona-agent chat socrates")
    assert words(chat) == words(commands(chat_md)[0])
    assert any(tests.startswith(command) for command in NOT_RUN_COMMANDS), tests


def test_an_openai_compatible_server_answers_once_configured(
    sandbox: Sandbox, llm: FakeLLM, port: int
) -> None:
    """The README's Ollama is the fake LLM; the rest of the block as written."""
    script = rewrite(OTHER_LLM.text, {"http://127.0.0.1:11434/v1": llm.base_url})
    llm.script(Reply("Relativity, in a word."))
    with sandbox.serving(script, port=port, env={"PERSONA_AGENT_PORT": str(port)}) as hub:
        task = send(hub.url, "albert-einstein", "Explain yourself.")
    assert answer(task) == "Relativity, in a word."
    assert llm.requests[-1]["model"] == "llama3.2"
    logged = f"LLM backend: openai at {llm.base_url}, model llama3.2"
    assert logged in hub.stderr  # "The log says which backend (with the server's base URL)"


def test_with_nothing_configured_the_embedded_model_is_the_backend(
    sandbox: Sandbox, port: int
) -> None:
    """Not loaded here (``PERSONA_AGENT_LOCAL_PRELOAD=false``: the model takes seconds to
    load; tests/integration/test_local_model.py runs it): the log line the docs show."""
    (serve,) = commands(LOCAL)
    logged = serve.split("# logs:", 1)[1].strip()
    env = {"PERSONA_AGENT_PORT": str(port), "PERSONA_AGENT_LOCAL_PRELOAD": "false"}
    with sandbox.serving(serve, port=port, env=env) as hub:
        pass
    assert logged in hub.stderr, hub.stderr


# Traces (docs/observability.md) ---------------------------------------------------------


@pytest.fixture
def otlp_http() -> Iterator[OTLPReceiver]:
    with OTLPReceiver("http") as receiver:
        yield receiver


def _serve_traced(sandbox: Sandbox, script: str, env: dict[str, str]) -> Server:
    """``script`` served, sent one message, and stopped: the spans not yet sent go as it
    stops."""
    port = free_port()
    with sandbox.serving(script, port=port, env={**env, "PERSONA_AGENT_PORT": str(port)}) as hub:
        assert answer(send(hub.url, "socrates", "Trace this.")), hub.stderr
    return hub


def test_traces_go_to_each_endpoint_the_docs_show(
    tmp_path: Path, llm_env: dict[str, str], otlp_http: OTLPReceiver
) -> None:
    """Each way of serving with traces the docs show but the first (the span tree's test,
    below), and serving with the SDK's switch on (docs/configuration.md), at once: hubs of
    their own, each sent a message."""
    _, grpc, hosted, console = expect(
        TRACES,
        "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 ",
        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT=https://otlp.example.com",
        "OTEL_TRACES_EXPORTER=console",
    )
    (switched,) = expect(SDK_SPANS, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=true uv run")
    with OTLPReceiver("grpc") as receiver, ThreadPoolExecutor(4) as pool:
        runs = [
            pool.submit(_serve_traced, Sandbox(tmp_path / name), script, llm_env)
            for name, script in (
                ("grpc", rewrite(grpc, {"http://127.0.0.1:4317": receiver.endpoint})),
                ("hosted", rewrite(hosted, {"https://otlp.example.com": otlp_http.endpoint})),
                ("console", console),
                ("switched", switched),
            )
        ]
        stopped = [run.result(timeout=180) for run in runs]
        over_grpc = {(s.name, s.service_name) for s in receiver.spans}
    assert ("invoke_agent socrates", "persona-agent") in over_grpc
    assert "invoke_agent socrates" in {s.name for s in otlp_http.spans}
    assert '"name": "invoke_agent socrates"' in stopped[2].stdout
    assert "invoke_agent" not in stopped[3].stdout  # spans made, sent nowhere


def _tree(text: str) -> list[tuple[int, re.Pattern[str], str]]:
    """The span tree's lines: depth, name (``...``: anything), kind (``""``: internal)."""
    lines: list[tuple[int, re.Pattern[str], str]] = []
    for line in text.splitlines()[1:]:  # the first is the caller's span
        found = re.match(r"^([\s│]*)[├└]─ (.+?)(?:\s{2,}(SERVER|CLIENT)\b.*|\s{2,}.*)?$", line)
        if found is None:
            continue  # a comment's second line
        depth = len(found.group(1)) // 3
        shown = re.sub(r"\s+\.\.\.$", "", found.group(2).strip())  # "name ...": several
        name = re.escape(shown).replace(r"\.\.\.", ".*")
        lines.append((depth, re.compile(name), found.group(3) or ""))
    return lines


def _ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> Iterator[ReceivedSpan]:
    parent = by_id.get(span.parent_span_id)
    while parent is not None:
        yield parent
        parent = by_id.get(parent.parent_span_id)


def test_a_streamed_answer_with_a_tool_call_makes_the_span_tree_shown(
    sandbox: Sandbox,
    llm: FakeLLM,
    llm_env: dict[str, str],
    personas_dir: Path,
    mcp_config_file: Path,
    otlp_http: OTLPReceiver,
    port: int,
) -> None:
    """The first command of the traces block, with the tests' toolsmith persona and its
    MCP servers (tests/integration/conftest.py), and the docs' tool ``lookup`` the test
    server's ``echo``."""
    script = rewrite(commands(TRACES)[0], {"http://127.0.0.1:4318": otlp_http.endpoint})
    llm.script(ToolCalls([(f"remote__{TOOL}", {"text": "hi"})]), Reply("Found it.", usage=(30, 5)))
    env = {
        **llm_env,
        "PERSONA_AGENT_PORT": str(port),
        "PERSONA_AGENT_PERSONAS_DIR": str(personas_dir),
        "PERSONA_AGENT_MCP_CONFIG": str(mcp_config_file),
    }
    with sandbox.serving(script, port=port, env=env) as hub:
        events = stream(hub.url, "toolsmith", "Look it up.")
    assert any(
        e.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED"
        for e in events
    )
    spans = otlp_http.spans
    by_id = {span.span_id: span for span in spans}
    tree = _tree(rewrite(SPAN_TREE.text, {"lookup": TOOL}))
    assert len(tree) >= 10
    kinds = {"SERVER": "SPAN_KIND_SERVER", "CLIENT": "SPAN_KIND_CLIENT", "": "SPAN_KIND_INTERNAL"}
    for index, (depth, name, kind) in enumerate(tree):
        parent = next((n for d, n, _ in reversed(tree[:index]) if d < depth), None)
        matching = [
            span
            for span in spans
            if name.fullmatch(span.name)
            and span.kind == kinds[kind]
            and (parent is None or any(parent.fullmatch(a.name) for a in _ancestors(span, by_id)))
        ]
        assert matching, (name.pattern, kind, sorted({(s.name, s.kind) for s in spans}))


# Logs (docs/observability.md, docs/configuration.md) ---------------------------------


def _json_values(text: str) -> list[Any]:
    """Every JSON value of a stream of them (what ``jq`` prints)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index = 0
    while index < len(text.rstrip()):
        value, end = decoder.raw_decode(text, index)
        values.append(value)
        index = end
        while index < len(text) and text[index].isspace():
            index += 1
    return values


def _pattern(shown: str) -> re.Pattern[str]:
    """A line the docs show, ``...`` standing for anything (``6cb3...``: an id cut short)."""
    pieces = re.split(r"[0-9a-f]*\.\.\.", shown)
    return re.compile(".*?".join(re.escape(piece) for piece in pieces), re.DOTALL)


def test_json_logs_name_the_failed_task_and_jq_finds_it(
    sandbox: Sandbox, llm: FakeLLM, llm_env: dict[str, str], port: int
) -> None:
    serve, by_task, warnings = commands(JSON_LOGS)
    shown = json.loads(JSON_LINE.text)  # the line docs/configuration.md shows
    llm.script(Fail(503, "upstream secret trouble"))
    env = {**llm_env, "PERSONA_AGENT_PORT": str(port)}
    with sandbox.serving(serve, port=port, env=env) as hub:
        task = send(hub.url, "socrates", "Fail, please.", **{"X-Request-Id": shown["request_id"]})
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    said = "".join(p.get("text", "") for p in task["status"]["message"]["parts"])
    failure = re.escape(LLM_FAILURE.text.strip()).replace("3f2a9c01b7de", "([0-9a-f]+)")
    told = re.fullmatch(failure, said)  # docs/security.md: the reference, not the secret
    assert told is not None, said
    lines = [json.loads(line) for line in (sandbox.root / "hub.jsonl").read_text().splitlines()]
    (logged,) = [
        line for line in lines if line.get("task") == task["id"] and line["level"] == "WARNING"
    ]
    assert set(logged) == set(shown)
    for key in ("level", "logger", "request_id", "persona"):
        assert logged[key] == shown[key]
    assert (logged["task"], logged["context"]) == (task["id"], task["contextId"])
    assert _pattern(shown["message"]).fullmatch(logged["message"]), logged["message"]
    assert f"(reference {told.group(1)})" in logged["message"]
    about = _json_values(sandbox.run(rewrite(by_task, {"6cb32865-...": task["id"]})).ok().stdout)
    assert about
    assert all(line["task"] == task["id"] for line in about)
    messages = _json_values(sandbox.run(warnings).ok().stdout)
    assert logged["message"] in messages


# Signed cards (docs/security.md) ------------------------------------------------------


def test_cards_are_signed_with_the_key_openssl_made(
    sandbox: Sandbox, llm_env: dict[str, str], port: int
) -> None:
    env = {**llm_env, "PERSONA_AGENT_PORT": str(port)}
    with sandbox.serving(SIGNED.text, port=port, env=env) as hub:
        jwks = httpx.get(f"{hub.url}/.well-known/jwks.json").json()
        shown = httpx.get(f"{hub.url}/a2a/socrates/.well-known/agent-card.json").json()
    (jwk,) = jwks["keys"]
    assert jwk["alg"] == "ES256"  # an EC P-256 key
    card = parse_agent_card(shown)
    assert len(card.signatures) == 1
    verify = create_signature_verifier(lambda kid, jku: PyJWK(jwk), ["ES256"])
    verify(card)  # raises unless the signature holds
