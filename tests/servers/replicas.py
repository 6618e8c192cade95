"""Replicas of the hub on one PostgreSQL database, behind nginx, as real processes.

The pieces, each usable alone:

- :func:`fresh_database`: an empty PostgreSQL database of the test's own while it runs;
- :func:`start_replica`: one ``persona-agent serve`` process (a :class:`Replica`, which
  can be killed, stopped and restarted on its port);
- :func:`nginx` / :func:`running_nginx` (from tests/servers/nginx_front.py):
  ``deploy/nginx.conf``, the very file users copy, with only its ports changed, in front
  of given ports;
- :func:`replica_set`: all three together, a :class:`ReplicaSet`.

They block (processes, polling): call them from synchronous tests, or from a thread.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from tests.migrated import PostgresTemplate
from tests.servers.empty_databases import EmptyDatabases
from tests.servers.nginx_front import (
    NGINX_CONF,
    Nginx,
    free_port,
    nginx,
    render_nginx_conf,
    running_nginx,
)

__all__ = [
    "NGINX_CONF",
    "Nginx",
    "Replica",
    "ReplicaSet",
    "free_port",
    "fresh_database",
    "migrated_database",
    "nginx",
    "render_nginx_conf",
    "replica_set",
    "running_nginx",
    "start_replica",
]


POSTGRES_URL_VARIABLE = "PERSONA_AGENT_TEST_POSTGRES_URL"
# Read at import, before tests/conftest.py clears PERSONA_AGENT_* for each test.
_POSTGRES_URL = os.environ.get(POSTGRES_URL_VARIABLE, "")
_POSTGRES_REQUIRED = os.environ.get("PERSONA_AGENT_TEST_POSTGRES_REQUIRED", "") == "1"
LOCAL_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"

START_TIMEOUT = 600.0
"""Seconds after which a replica that neither answers ``/healthz`` nor has exited is given
up on: a safety bound against a hang, not an expectation. A replica is waited for until
it answers or its process ends; on a busy two-core machine a start takes tens of seconds
(three replicas at once, each importing the hub and joining the cluster)."""
STOP_TIMEOUT = 120.0
"""Seconds a replica may take to exit after SIGTERM (its shutdown grace included): a
safety bound, as :data:`START_TIMEOUT`."""

_DATABASES = EmptyDatabases(os.environ.get("PYTEST_XDIST_WORKER", ""))
"""This process's empty databases (a pytest-xdist worker's own)."""


@contextmanager
def fresh_database() -> Iterator[str]:
    """Yield the ``postgresql+asyncpg://`` URL of an empty PostgreSQL database that no one
    else uses until the block ends: one of this process's, beside the test database, ended
    sessions, schemas and all brought back to a new database's (tests/servers/
    empty_databases.py; connections left open by killed replicas are ended at its next
    loan).

    The server and test database are those of ``PERSONA_AGENT_TEST_POSTGRES_URL`` (else
    the machine's own, :data:`LOCAL_POSTGRES_URL`). When it does not answer the test is
    skipped, or fails under ``PERSONA_AGENT_TEST_POSTGRES_REQUIRED=1`` (as in CI) or with
    a URL set.
    """
    with _loan(_DATABASES.lend) as url:
        yield url


@contextmanager
def migrated_database(template: PostgresTemplate) -> Iterator[str]:
    """As :func:`fresh_database`, a database as a fresh migration leaves it (``template``,
    tests/migrated.py): hubs started on it find it at the newest revision."""
    with _loan(lambda base: _DATABASES.lend_migrated(base, template)) as url:
        yield url


@contextmanager
def _loan(lend: Callable[[str], AbstractContextManager[str]]) -> Iterator[str]:
    base = make_url(_POSTGRES_URL or LOCAL_POSTGRES_URL)
    with ExitStack() as stack:
        try:
            url = stack.enter_context(lend(base.render_as_string(hide_password=False)))
        except (OSError, SQLAlchemyError) as error:
            where = base.render_as_string(hide_password=True)
            if _POSTGRES_REQUIRED or _POSTGRES_URL:
                pytest.fail(f"PostgreSQL at {where} is required and did not answer: {error}")
            pytest.skip(
                f"no PostgreSQL at {where} ({type(error).__name__}): set {POSTGRES_URL_VARIABLE}"
            )
        yield url


class Replica:
    """One ``persona-agent serve`` process on 127.0.0.1 (made by :func:`start_replica`).

    Its output (stdout and stderr, every run of it) goes to ``log_path``; :meth:`output`
    reads it at any time. Closing the replica (``with``, or :meth:`close`) kills it if it
    still runs.
    """

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, port: int) -> None:
        """Start the process (without waiting for it: :meth:`wait_healthy`)."""
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = cwd / f"replica-{port}.log"
        self._command = command
        self._env = env
        self._cwd = cwd
        self._log: IO[bytes] | None = None
        self.process: subprocess.Popen[bytes] = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        if self._log is not None:
            self._log.close()
        self._log = self.log_path.open("ab")
        return subprocess.Popen(
            self._command,
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        """Return once ``/healthz`` answers 200, however long the replica takes to start;
        raise AssertionError with its output once its process has exited (it failed), or,
        a safety bound against a hang, after ``timeout`` seconds (the replica killed)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=10).status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet, or too busy to answer in time: asked again
            status = self.process.poll()
            if status is not None:
                raise AssertionError(
                    f"the replica on port {self.port} exited (status {status}) before it "
                    f"answered /healthz:\n{self.output()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(
                    f"the replica on port {self.port} neither answered /healthz nor exited "
                    f"in {timeout:g} s (a hang?):\n{self.output()}"
                )
            time.sleep(0.1)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def output(self) -> str:
        """Everything the replica wrote so far, across restarts."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> int:
        """SIGKILL: no shutdown at all. Returns the exit status."""
        if self.running:
            self.process.kill()
        return self.process.wait(timeout=STOP_TIMEOUT)

    def terminate(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, and wait for the replica to exit (killed after ``timeout``)."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT)
            raise AssertionError(
                f"the replica on port {self.port} did not stop within {timeout} s of SIGTERM:\n"
                f"{self.output()}"
            ) from None

    def restart(self) -> None:
        """Start again on the same port with the same settings (stopped with SIGTERM first
        if it still runs); returns once it answers ``/healthz``."""
        if self.running:
            self.terminate()
        self.process = self._spawn()
        self.wait_healthy()

    def close(self) -> None:
        if self.running:
            self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Replica:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Replica({self.url}, pid={self.process.pid}, running={self.running})"


def start_replica(
    personas_dir: Path,
    data_dir: Path,
    database_url: str,
    port: int | None = None,
    **settings: str,
) -> Replica:
    """Start ``persona-agent serve`` on 127.0.0.1 (``port``, else a free one) on
    ``database_url``; return it once it answers ``/healthz`` (AssertionError with its
    output if it exits first: see :meth:`Replica.wait_healthy`).

    ``settings`` are ``PERSONA_AGENT_*`` variables without the prefix (``LLM_BASE_URL=...``),
    as for :func:`tests.servers.hub_process.hub_process`; the caller's own
    ``PERSONA_AGENT_*``, ``OPENAI_*`` and ``AZURE_OPENAI_*`` variables are not passed on.
    Its output goes to ``data_dir/../replica-PORT.log``. Close it (or use it in ``with``).
    """
    replica = _spawn_replica(personas_dir, data_dir, database_url, port, **settings)
    try:
        replica.wait_healthy()
    except BaseException:
        replica.close()
        raise
    return replica


def _spawn_replica(
    personas_dir: Path,
    data_dir: Path,
    database_url: str,
    port: int | None = None,
    **settings: str,
) -> Replica:
    """:func:`start_replica` without the wait."""
    port = port or free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PERSONA_AGENT_", "OPENAI_", "AZURE_OPENAI_"))
    }
    env["PERSONA_AGENT_DATA_DIR"] = str(data_dir.resolve())
    env["PERSONA_AGENT_DATABASE_URL"] = database_url
    env["PERSONA_AGENT_WATCH_PERSONAS"] = "false"
    env.update({f"PERSONA_AGENT_{name.upper()}": value for name, value in settings.items()})
    command = [sys.executable, "-m", "persona_agent.cli", "serve", "--port", str(port)]
    return Replica([*command, "-d", str(personas_dir.resolve())], env, data_dir.parent, port)


@dataclass
class ReplicaSet:
    """Replicas on one database behind nginx (made by :func:`replica_set`)."""

    front: str
    """nginx's URL, which is also every replica's ``PUBLIC_BASE_URL``."""
    replicas: list[Replica]
    database_url: str
    proxy: Nginx
    """nginx itself: its access log tells which replica answered each request."""

    @property
    def ports(self) -> list[int]:
        return [replica.port for replica in self.replicas]


@contextmanager
def replica_set(
    n: int, personas_dir: Path, tmp_path: Path, *, at_once: bool = False, **settings: str
) -> Iterator[ReplicaSet]:
    """A fresh database, ``n`` replicas on it and nginx in front of them.

    The replicas start one after the other (``at_once``: all together, then each is
    waited for), with data directories ``tmp_path/replica-I`` and the settings
    ``settings`` (see :func:`start_replica`); their ``PUBLIC_BASE_URL`` is nginx's URL
    unless given. Everything is stopped at exit and the database given back.
    """
    front_port = free_port()
    settings = {"PUBLIC_BASE_URL": f"http://127.0.0.1:{front_port}", **settings}
    with fresh_database() as database_url, ExitStack() as stack:
        replicas: list[Replica] = []
        for i in range(n):
            replica = stack.enter_context(
                _spawn_replica(
                    personas_dir, tmp_path / f"replica-{i}", database_url, None, **settings
                )
            )
            replicas.append(replica)
            if not at_once:
                replica.wait_healthy()
        for replica in replicas:
            replica.wait_healthy()
        ports = [replica.port for replica in replicas]
        front = stack.enter_context(running_nginx(ports, front_port))
        yield ReplicaSet(front.url, replicas, database_url, front)
