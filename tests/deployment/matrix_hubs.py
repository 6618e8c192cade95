"""The matrix's deployments as real processes: one hub, or two replicas behind nginx, each on
a fresh PostgreSQL database, with API keys, gRPC and the matrix's scripted model.

A :class:`Deployment` names, for each operation, the base URL a client takes ("here") and
the one it takes for the same task afterwards ("there": the other replica; on one hub, the
same hub), and each replica's gRPC address.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.fake_llm import Fail, FakeLLM, Reply, Scripted
from tests.integration.conftest import BUNDLED
from tests.servers.replicas import (
    Nginx,
    free_port,
    fresh_database,
    running_nginx,
    start_replica,
)

__all__ = [
    "FULL_KEY",
    "LIMITED_KEY",
    "MODEL_DOWN",
    "Deployment",
    "deployment",
    "matrix_answer",
    "speaker",
]

FULL_KEY = "matrix-full-key-0123456789abcdef"
"""An API key with every scope, for every persona."""
LIMITED_KEY = "matrix-limited-key-0123456789ab"
"""An API key limited to a persona the matrix never calls (``ada-lovelace``)."""
KEYS: list[dict[str, Any]] = [
    {"name": "matrix", "key": FULL_KEY},
    {"name": "elsewhere", "key": LIMITED_KEY, "personas": ["ada-lovelace"]},
]
MODEL_DOWN = "the matrix's model server is down"
"""What the model server answers (HTTP 500) to a message holding ``[fail]``."""
_YOU_ARE = re.compile(r"You are ([^.\n]+)\.")


def speaker(body: dict[str, Any]) -> str:
    """Who the model is asked to be (the system prompt's ``You are NAME.``)."""
    for message in body.get("messages", []):
        if message.get("role") == "system":
            found = _YOU_ARE.search(str(message.get("content", "")))
            if found:
                return found.group(1)
    return "nobody"


def matrix_answer(body: dict[str, Any]) -> Scripted:
    """The model of every cell, by the last user message: ``[fail]`` a 500, ``[slow]`` 200
    words 50 ms apart (10 s: a cell cancels it long before), ``[brief]`` 8 words 50 ms
    apart, anything else at once; each answer says who gave it (``Answer from Socrates.``),
    so that a panel's answer shows each member's."""
    said = ""
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            said = str(message.get("content", ""))
            break
    if "[fail]" in said:
        return Fail(500, MODEL_DOWN)
    who = speaker(body)
    if "[slow]" in said or "[brief]" in said:
        words = [f"{who}-w{i} " for i in range(200 if "[slow]" in said else 8)]
        return Reply("".join(words), chunks=words, token_delay=0.05)
    return Reply(f"Answer from {who}.")


@dataclass
class Deployment:
    """One deployment of the matrix, running."""

    name: str
    bases: list[str]
    """Where clients go, in turn: the one hub; or nginx, then each replica."""
    replicas: list[str]
    """Each hub process's own URL."""
    grpc: list[str]
    """Each hub process's gRPC address (``127.0.0.1:PORT``), as :attr:`replicas`."""
    database_url: str
    personas_dir: Path
    public: str
    """The URL the cards name (nginx, or the one hub)."""
    settings: dict[str, str]
    """The hub processes' ``PERSONA_AGENT_*`` settings, without the prefix."""
    grpc_public: str = ""
    """The gRPC address the cards name (nginx's gRPC port, or the one hub's)."""
    proxy: Nginx | None = None
    """nginx, on two replicas: its access log names the replica of each call."""

    def here(self) -> str:
        """Where a cell starts: the first replica (the one hub)."""
        return self.replicas[0]

    def there(self) -> str:
        """Where a cell continues "from the other replica": the second (on one hub, the
        same)."""
        return self.replicas[-1]

    def grpc_of(self, base: str) -> str:
        return self.grpc[self.replicas.index(base)]


def _settings(llm: FakeLLM, public: str) -> dict[str, str]:
    return {
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "test",
        "LLM_MAX_RETRIES": "0",
        "LLM_TIMEOUT": "10",
        "API_KEYS": json.dumps(KEYS),
        "A2A_ACCESS": "authenticated",
        "PUBLIC_BASE_URL": public,
        "SHUTDOWN_GRACE_SECONDS": "2",
        "REPLICA_LEASE_SECONDS": "5",
        "LOG_LEVEL": "WARNING",
    }


@contextmanager
def deployment(name: str, root: Path, llm: FakeLLM) -> Iterator[Deployment]:
    """Start the deployment ``name`` (``one-hub`` or ``two-replicas``) under ``root``:
    a fresh database, the bundled personas, the hub processes (and nginx); stopped at exit."""
    personas_dir = root / "personas"
    if not personas_dir.exists():
        shutil.copytree(BUNDLED, personas_dir)
    n = 1 if name == "one-hub" else 2
    ports = [free_port() for _ in range(n)]
    grpc_ports = [free_port() for _ in range(n)]
    front_port, grpc_front_port = free_port(), free_port()
    public = f"http://127.0.0.1:{front_port if n > 1 else ports[0]}"
    grpc_public = f"127.0.0.1:{grpc_front_port if n > 1 else grpc_ports[0]}"
    settings = {**_settings(llm, public), "GRPC_PUBLIC_ADDRESS": grpc_public}
    with fresh_database() as database_url, ExitStack() as stack:
        for i in range(n):
            stack.enter_context(
                start_replica(
                    personas_dir,
                    root / f"{name}-{i}",
                    database_url,
                    ports[i],
                    GRPC_PORT=str(grpc_ports[i]),
                    GRPC_HOST="127.0.0.1",
                    **settings,
                )
            )
        replicas = [f"http://127.0.0.1:{port}" for port in ports]
        bases = list(replicas)
        front = None
        if n > 1:
            front = stack.enter_context(
                running_nginx(ports, front_port, grpc_ports, grpc_front_port)
            )
            bases = [front.url, *replicas]
        yield Deployment(
            name,
            bases,
            replicas,
            [f"127.0.0.1:{port}" for port in grpc_ports],
            database_url,
            personas_dir,
            public,
            settings,
            grpc_public,
            front,
        )
