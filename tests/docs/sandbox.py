"""Where the doc tests run shell snippets: a directory laid out like a clone of the
repository, and ``bash`` with a clean environment.

What a snippet assumes of a reader's machine, and how the sandbox provides it:

- the working directory is a clone: ``personas/`` is a copy of the bundled personas (a
  snippet may add files there); ``examples/``, ``tests/``, ``deploy/`` and ``bench/`` are
  links to the repository's own, read-only for the snippets;
- ``uv run CMD ...`` runs ``CMD`` in the project's environment: the tests already run in
  it, so ``uv`` is a stand-in (:data:`UV_STAND_IN`) that runs ``CMD`` with that
  environment's ``bin`` first on ``PATH`` (``persona-agent``, ``python``); any other ``uv``
  command fails the test;
- nothing of the developer's environment leaks in: no ``PERSONA_AGENT_*``, ``OPENAI_*``
  or ``OTEL_*`` variable, a ``HOME`` of the sandbox's own; a test passes what a snippet
  needs (the fake LLM's URL instead of the embedded model, a free port) in ``env``;
- URLs of the hub's default address (``http://127.0.0.1:8000``) become the test hub's
  with :func:`rewrite`, which fails when the text it replaces is no longer there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.docs.snippets import REPO

__all__ = ["DOC_URL", "UV_STAND_IN", "Ran", "Sandbox", "Server", "free_port", "rewrite"]

DOC_URL = "http://127.0.0.1:8000"
"""The hub's address in the docs (its default host and port)."""

UV_STAND_IN = """#!/bin/sh
# The docs' `uv run CMD ...`: CMD in the project's environment, which the doc tests
# already run in (its bin directory is first on PATH).
if [ "$1" != run ]; then
    echo "doc tests: a snippet may run 'uv run ...', not 'uv $*'" >&2
    exit 97
fi
shift
exec "$@"
"""

_LINKED = ("examples", "tests", "deploy", "bench")
_START_TIMEOUT = 120.0  # a safety bound: a start returns as soon as the server answers
_STOP_TIMEOUT = 20.0


def free_port() -> int:
    """A port nothing listens on at the moment, on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rewrite(text: str, replacements: Mapping[str, str]) -> str:
    """``text`` with each key replaced by its value; a key that is not in ``text`` fails
    (the snippet changed, and the substitution with it must be looked at again)."""
    for old, new in replacements.items():
        assert old in text, f"{old!r} is no longer in the snippet {text!r}"
        text = text.replace(old, new)
    return text


@dataclass(frozen=True)
class Ran:
    """A command's outcome."""

    command: str
    returncode: int
    stdout: str
    stderr: str

    def ok(self) -> Ran:
        """Itself, once its exit code is 0."""
        assert self.returncode == 0, (
            f"`{self.command}` exited {self.returncode}\n"
            f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )
        return self

    def json(self) -> Any:
        return json.loads(self.stdout)


class Server:
    """A snippet that serves, run by :meth:`Sandbox.serving`."""

    def __init__(self, script: str, process: subprocess.Popen[bytes], url: str, logs: Path):
        self.script = script
        self.process = process
        self.url = url
        self._logs = logs

    @property
    def stdout(self) -> str:
        return (self._logs / "stdout").read_text(encoding="utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return (self._logs / "stderr").read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        """SIGTERM to every process the snippet started (as Ctrl-C would reach them), and
        wait for them; the exit status of the snippet's shell."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(_STOP_TIMEOUT)
                raise AssertionError(f"`{self.script}` did not stop on SIGTERM") from None
        return self.process.returncode


class Sandbox:
    """A working directory laid out as a clone of the repository (see the module
    docstring), and the environment snippets run in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(REPO / "personas", root / "personas")
        for name in _LINKED:
            (root / name).symlink_to(REPO / name, target_is_directory=True)
        stand_ins = root / ".doc-test-bin"
        stand_ins.mkdir()
        uv = stand_ins / "uv"
        uv.write_text(UV_STAND_IN, encoding="utf-8")
        uv.chmod(0o755)
        home = root / ".home"
        home.mkdir()
        venv_bin = Path(sys.executable).parent
        self.env: dict[str, str] = {
            "PATH": os.pathsep.join(
                [str(stand_ins), str(venv_bin), "/usr/local/bin", "/usr/bin", "/bin"]
            ),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "COLUMNS": "200",
        }
        if "PYTHONPATH" in os.environ:  # the project's environment, as the tests run in it
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        self._runs = 0

    def run(
        self,
        command: str,
        *,
        env: Mapping[str, str] | None = None,
        stdin: str = "",
        timeout: float = 60.0,
    ) -> Ran:
        """Run ``command`` with ``bash -c`` in the sandbox; its exit code and output."""
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.root,
            env={**self.env, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Ran(command, done.returncode, done.stdout, done.stderr)

    @contextmanager
    def serving(
        self,
        script: str,
        *,
        port: int,
        env: Mapping[str, str] | None = None,
        ready: str = "/healthz",
    ) -> Iterator[Server]:
        """Run ``script`` (a snippet that ends by serving) with ``bash -c`` in its own
        process group; yield once ``http://127.0.0.1:{port}{ready}`` answers (200 for the
        hub's ``/healthz``, any answer for another path) (the port is the caller's to pass
        on, e.g. as ``PERSONA_AGENT_PORT``); stop it after."""
        self._runs += 1
        logs = self.root / ".doc-test-logs" / str(self._runs)
        logs.mkdir(parents=True)
        with (logs / "stdout").open("wb") as out, (logs / "stderr").open("wb") as err:
            process = subprocess.Popen(
                ["bash", "-c", script],
                cwd=self.root,
                env={**self.env, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        server = Server(script, process, f"http://127.0.0.1:{port}", logs)
        try:
            _wait_until_serving(server, ready)
            yield server
        finally:
            server.stop()


def _wait_until_serving(server: Server, path: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while True:
        try:
            status = httpx.get(f"{server.url}{path}", timeout=2).status_code
            if status == 200 or path != "/healthz":
                return
        except httpx.TransportError:
            pass
        if server.process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise AssertionError(
                f"`{server.script}` did not serve on {server.url} "
                f"(exit code {server.process.returncode})\n"
                f"stdout:\n{server.stdout}\nstderr:\n{server.stderr}"
            )
        time.sleep(0.05)
