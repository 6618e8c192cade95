"""nginx in front of given ports, as a real process: ``deploy/nginx.conf``, the very file
users copy, with only its ports changed (tests/servers/replicas.py puts it in front of
replicas).

It blocks (a process, polling): call it from synchronous tests, or from a thread.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "GRPC_UPSTREAM",
    "HTTP_UPSTREAM",
    "NGINX_CONF",
    "Nginx",
    "free_port",
    "nginx",
    "render_nginx_conf",
    "running_nginx",
]

REPO = Path(__file__).resolve().parents[2]
NGINX_CONF = REPO / "deploy" / "nginx.conf"
NGINX_START_TIMEOUT = 120.0
"""Seconds after which nginx, neither listening nor exited, is given up on (a safety bound)."""
NGINX_STOP_TIMEOUT = 10.0
"""Seconds for nginx's graceful stop before it is killed (then as long again to exit)."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (free when asked, not reserved)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
