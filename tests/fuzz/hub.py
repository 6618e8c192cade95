"""A real hub for the fuzzers: uvicorn in a thread on 127.0.0.1, over a temporary copy of
the bundled personas, the scripted fake LLM answering; and the check that it serves on."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState

from persona_agent.api.app import create_app
from persona_agent.settings import Settings
from tests.fuzz.budget import DEADLINE
from tests.migrated import WORKER_SQLITE
from tests.servers.hub_process import STARTUP

__all__ = ["SENTINEL", "FuzzHub", "assert_healthy", "assert_serving", "running_hub"]

BUNDLED = Path(__file__).resolve().parents[2] / "personas"

SENTINEL = "sentinel-7f3a"
"""A persona the fuzzers never address (cases naming it are left out): after the run it
must still answer, whatever the fuzzers did to the others."""

_SENTINEL_PERSONA = {
    "name": "Sam the Sentinel",
    "description": "A test persona that stays through the fuzzing.",
    "personal_background": "Sam watches the hub.",
    "language_style": {"tone": "plain"},
    "knowledge_domains": {"Watching": ["staying"]},
    "tools": {"allow": []},
}


@dataclass
class FuzzHub:
    url: str
    personas_dir: Path


@contextmanager
def running_hub(root: Path, llm_url: str, **overrides: Any) -> Iterator[FuzzHub]:
    """A hub on a copy of the bundled personas (plus :data:`SENTINEL`) under ``root``,
    with none of the environment's ``PERSONA_AGENT_*`` settings; ``overrides`` are
    settings."""
    personas_dir = root / "personas"
    shutil.copytree(BUNDLED, personas_dir)
    (personas_dir / f"{SENTINEL}.yaml").write_text(
        yaml.safe_dump(_SENTINEL_PERSONA), encoding="utf-8"
    )
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        values: dict[str, Any] = {
            "personas_dir": personas_dir,
            "data_dir": root / "data",
            "public_base_url": url,
            "llm_base_url": llm_url,
            "llm_api_key": "test-key",
            "llm_max_retries": 0,
            "llm_timeout": DEADLINE,
            "watch_personas": False,
            "shutdown_grace_seconds": 2,
            **overrides,
        }
        server, thread = _started(values, sock)
        try:
            yield FuzzHub(url, personas_dir)
        finally:
            server.should_exit = True
            thread.join(timeout=DEADLINE)
            assert not thread.is_alive(), f"the hub did not stop within {DEADLINE:g} s"


def _started(
    values: dict[str, Any], sock: socket.socket
) -> tuple[uvicorn.Server, threading.Thread]:
    """The hub of these settings, serving on ``sock`` in a thread of its own; it is built
    and started with the environment's settings out of the way (the session's are left
    as they were once it runs)."""
    with pytest.MonkeyPatch.context() as environment:
        for name in list(os.environ):
            if name.startswith(("PERSONA_AGENT_", "OPENAI_", "OTEL_")):
                environment.delenv(name)
        settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
        WORKER_SQLITE.under(settings)  # a fresh migration's file: not migrated again
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings), log_level="warning", timeout_graceful_shutdown=5)
        )
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + STARTUP
        while not server.started:  # lifespan (database, personas) done: it serves
            assert thread.is_alive(), "the hub stopped during start-up"
            assert time.monotonic() < deadline, f"the hub did not start within {STARTUP:g} s"
            time.sleep(0.02)
    return server, thread


def assert_healthy(url: str) -> None:
    """``/healthz`` answers 200 (within :data:`DEADLINE`, a hang guard)."""
    health = httpx.get(f"{url}/healthz", timeout=DEADLINE)
    assert health.status_code == 200, health.text


def assert_serving(url: str) -> None:
    """The hub serves on: ``/healthz`` answers, and :data:`SENTINEL` answers a message
    through the real a2a-sdk client (the fake LLM echoes it)."""
    assert_healthy(url)
    text = f"Still there? {uuid.uuid4()}"
    answer = asyncio.run(_ask(url, SENTINEL, text))
    assert text in answer, answer


async def _ask(url: str, persona_id: str, text: str) -> str:
    async with asyncio.timeout(DEADLINE), httpx.AsyncClient(timeout=DEADLINE) as http:
        card = await http.get(f"{url}/a2a/{persona_id}/.well-known/agent-card.json")
        assert card.status_code == 200, card.text
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(
            parse_agent_card(card.json())
        )
        message = Message(
            role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)]
        )
        responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
        assert len(responses) == 1, responses
        assert responses[0].HasField("task"), responses
        task = responses[0].task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        return "".join(part.text for artifact in task.artifacts for part in artifact.parts)
