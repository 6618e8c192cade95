"""Replicas of the hub on one PostgreSQL database, behind nginx, as real processes.

The pieces, each usable alone:

- :func:`fresh_database`: a new, empty PostgreSQL database, dropped at exit;
- :func:`start_replica`: one ``persona-agent serve`` process (a :class:`Replica`, which
  can be killed, stopped and restarted on its port);
- :func:`nginx` / :func:`running_nginx`: ``deploy/nginx.conf``, the very file users copy,
  with only its ports changed, in front of given ports;
- :func:`replica_set`: all three together, a :class:`ReplicaSet`.

They block (processes, polling): call them from synchronous tests, or from a thread.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import create_async_engine

__all__ = [
    "NGINX_CONF",
    "Nginx",
    "Replica",
    "ReplicaSet",
    "free_port",
    "fresh_database",
    "nginx",
    "render_nginx_conf",
    "replica_set",
    "running_nginx",
    "start_replica",
]

REPO = Path(__file__).resolve().parents[2]
NGINX_CONF = REPO / "deploy" / "nginx.conf"

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
NGINX_START_TIMEOUT = 120.0
"""Seconds after which nginx, neither listening nor exited, is given up on (a safety bound)."""
NGINX_STOP_TIMEOUT = 10.0
"""Seconds for nginx's graceful stop before it is killed (then as long again to exit)."""

_T = TypeVar("_T")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (free when asked, not reserved)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run_async(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to its end in a thread of its own (a test's event loop may be
    running in this one)."""
    results: list[_T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(asyncio.run(factory()))
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=target, name="replicas-db")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


async def _execute(url: str, statement: str) -> None:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(statement))
    finally:
        await engine.dispose()


@contextmanager
def fresh_database() -> Iterator[str]:
    """Create a new database ``pa_r_<hex>`` on the test PostgreSQL; yield its
    ``postgresql+asyncpg://`` URL; drop it ``WITH (FORCE)`` at exit (connections left
    open by killed replicas included).

    The server is the one of ``PERSONA_AGENT_TEST_POSTGRES_URL`` (else the machine's own,
    :data:`LOCAL_POSTGRES_URL`). When it does not answer the test is skipped, or fails
    under ``PERSONA_AGENT_TEST_POSTGRES_REQUIRED=1`` (as in CI) or with a URL set.
    """
    base = make_url(_POSTGRES_URL or LOCAL_POSTGRES_URL)
    name = f"pa_r_{uuid.uuid4().hex}"
    admin = base.render_as_string(hide_password=False)
    try:
        _run_async(lambda: _execute(admin, f'CREATE DATABASE "{name}"'))
    except (OSError, SQLAlchemyError) as error:
        where = base.render_as_string(hide_password=True)
        if _POSTGRES_REQUIRED or _POSTGRES_URL:
            pytest.fail(f"PostgreSQL at {where} is required and did not answer: {error}")
        pytest.skip(
            f"no PostgreSQL at {where} ({type(error).__name__}): set {POSTGRES_URL_VARIABLE}"
        )
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        _run_async(lambda: _execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


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


_UPSTREAM = re.compile(
    r"^(?P<indent>[ \t]*)server 127\.0\.0\.1:(?P<port>\d+)(?P<rest>[^\n]*)$", re.M
)
_BLOCK = re.compile(r"^[ \t]*upstream (?P<name>\w+) \{", re.M)
_LISTEN = re.compile(r"^(?P<indent>[ \t]*)listen \d+(?P<rest>[^;\n]*);", re.M)
HTTP_UPSTREAM = "persona_agent"
GRPC_UPSTREAM = "persona_agent_grpc"


def render_nginx_conf(
    text: str,
    ports: list[int],
    listen_port: int,
    grpc_ports: list[int] | None = None,
    grpc_listen_port: int | None = None,
) -> str:
    """``deploy/nginx.conf`` (as ``text``) with the servers of its HTTP upstream on
    ``ports`` and its HTTP ``listen`` port ``listen_port``; with those of its gRPC upstream
    on ``grpc_ports`` (else as they are) and its gRPC (``http2``) ``listen`` port
    ``grpc_listen_port`` (else as it is); nothing else changed.

    An upstream's ``server 127.0.0.1:PORT ...`` lines take the ports in order; fewer ports
    drop the last lines, more repeat the last line's parameters."""
    blocks = list(_BLOCK.finditer(text))
    names = [block["name"] for block in blocks]
    listens = [m["rest"].strip() for m in _LISTEN.finditer(text)]
    if HTTP_UPSTREAM not in names or listens.count("") != 1 or listens.count("http2") > 1:
        raise ValueError(
            "the nginx configuration has no upstream persona_agent, or not one HTTP listen"
        )
    wanted = {HTTP_UPSTREAM: ports, GRPC_UPSTREAM: grpc_ports}
    pieces = []
    for i, block in enumerate(blocks):
        stop = blocks[i + 1].start() if i + 1 < len(blocks) else len(text)
        before = text[: block.start()] if i == 0 else ""
        pieces.append(before + _servers(text[block.start() : stop], wanted.get(block["name"])))
    ports_of = {"": listen_port, "http2": grpc_listen_port}

    def listen(m: re.Match[str]) -> str:
        port = ports_of.get(m["rest"].strip())
        return m[0] if port is None else f"{m['indent']}listen {port}{m['rest']};"

    return _LISTEN.sub(listen, "".join(pieces) if blocks else text)


def _servers(block: str, ports: list[int] | None) -> str:
    """``block`` (an upstream and what follows it) with its server lines on ``ports``."""
    if ports is None:
        return block
    if not ports:
        raise ValueError("nginx needs at least one upstream port")
    lines = list(_UPSTREAM.finditer(block))
    if not lines:
        raise ValueError("an upstream of the nginx configuration has no servers")
    last = lines[-1]
    servers = [
        f"{m['indent']}server 127.0.0.1:{port}{m['rest']}"
        for m, port in zip([*lines, *[last] * len(ports)], ports, strict=False)
    ]
    return block[: lines[0].start()] + "\n".join(servers) + block[last.end() :]


def _nginx_binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None
    )
    if found is None:
        pytest.skip("nginx is not installed (.ci/run installs it: apt-get install nginx)")
    return found


@dataclass
class Nginx:
    """A running nginx (:func:`running_nginx`): its URL and its prefix directory."""

    url: str
    port: int
    prefix: Path
    process: subprocess.Popen[bytes]
    grpc: str = ""
    """Its gRPC address (``127.0.0.1:PORT``, the ``http2`` listen port)."""

    def access_log(self) -> str:
        return self._read("logs/access.log")

    def error_log(self) -> str:
        return self._read("logs/error.log") + self._read("logs/stderr.log")

    def upstreams(self, path: str) -> list[str]:
        """The ``upstream=`` of each access-log line whose request is ``path`` exactly
        (``GET /healthz?n=1 HTTP/1.1`` is ``/healthz?n=1``), in the order logged."""
        found = []
        for line in self.access_log().splitlines():
            request = re.search(r'"\S+ (\S+) [^"]*"', line)
            upstream = re.search(r"upstream=(\S+(?:, \S+)*) upstream_status", line)
            if request and upstream and request[1] == path:
                found.append(upstream[1])
        return found

    def _read(self, name: str) -> str:
        path = self.prefix / name
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""


@contextmanager
def running_nginx(
    ports: list[int],
    listen_port: int | None = None,
    grpc_ports: list[int] | None = None,
    grpc_listen_port: int | None = None,
) -> Iterator[Nginx]:
    """``deploy/nginx.conf`` in front of 127.0.0.1:``ports``, listening on ``listen_port``
    (else a free port), and for gRPC in front of 127.0.0.1:``grpc_ports`` (else the file's),
    listening on ``grpc_listen_port`` (else a free port), run as
    ``nginx -p PREFIX -c CONF -g "daemon off;"`` in a fresh prefix directory; stopped at
    exit (SIGQUIT, then SIGKILL) and the directory removed.

    The prefix is a new directory of the system's temporary directory, readable by all:
    started as root, nginx's workers run as ``nobody`` and spool bodies under it.
    Skipped when nginx is not installed; AssertionError with nginx's error log when it
    does not start.
    """
    binary = _nginx_binary()
    listen_port = listen_port or free_port()
    grpc_listen_port = grpc_listen_port or free_port()
    prefix = Path(tempfile.mkdtemp(prefix="pa-nginx-"))
    try:
        prefix.chmod(0o755)
        (prefix / "logs").mkdir()
        (prefix / "temp").mkdir()
        conf = prefix / "nginx.conf"
        conf.write_text(
            render_nginx_conf(
                NGINX_CONF.read_text(encoding="utf-8"),
                ports,
                listen_port,
                grpc_ports,
                grpc_listen_port,
            ),
            encoding="utf-8",
        )
        with (prefix / "logs" / "stderr.log").open("wb") as stderr:
            process = subprocess.Popen(
                [binary, "-p", f"{prefix}/", "-c", str(conf), "-g", "daemon off;"],
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=subprocess.STDOUT,
            )
        front = Nginx(
            f"http://127.0.0.1:{listen_port}",
            listen_port,
            prefix,
            process,
            f"127.0.0.1:{grpc_listen_port}",
        )
        try:
            _wait_listening(front)
            yield front
        finally:
            _stop_nginx(process)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def _wait_listening(front: Nginx) -> None:
    """Return once nginx accepts connections; AssertionError with its error log once it
    has exited, or after :data:`NGINX_START_TIMEOUT` (a safety bound)."""
    deadline = time.monotonic() + NGINX_START_TIMEOUT
    while True:
        try:
            with socket.create_connection(("127.0.0.1", front.port), timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline or front.process.poll() is not None:
                _stop_nginx(front.process)
                raise AssertionError(
                    f"nginx did not start on port {front.port}:\n{front.error_log()}"
                ) from None
            time.sleep(0.05)


def _stop_nginx(process: subprocess.Popen[bytes]) -> None:
    """Graceful stop (SIGQUIT: open requests finish), then SIGKILL after a while."""
    if process.poll() is None:
        process.send_signal(signal.SIGQUIT)
        try:
            process.wait(timeout=NGINX_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait(timeout=NGINX_STOP_TIMEOUT)


@contextmanager
def nginx(ports: list[int], listen_port: int | None = None) -> Iterator[str]:
    """:func:`running_nginx`, yielding only its URL (``http://127.0.0.1:PORT``)."""
    with running_nginx(ports, listen_port) as front:
        yield front.url


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
    unless given. Everything is stopped at exit and the database dropped.
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
