"""``persona-agent serve`` as a real process, for tests of what only a process shows."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx

from tests.migrated import WORKER_SQLITE

STARTUP = 300.0
"""Seconds the hub may take to be ready (``/readyz``): a safety bound against a hang, not a
pause (every wait on it ends as soon as the hub is ready, or its process has exited). A
busy two-core machine can take tens of seconds to start Python, import the hub, migrate
its database and load its personas."""


def hub_process(
    personas_dir: Path, data_dir: Path, **settings: str
) -> AbstractContextManager[tuple[str, subprocess.Popen[str]]]:
    """Start the hub on a free 127.0.0.1 port; yield its URL and process once it is ready
    (``/readyz`` answers 200, within :data:`STARTUP`).

        ``settings`` are ``PERSONA_AGENT_*`` variables without the prefix (``LLM_BASE_URL=...``);
        the caller's own ``PERSONA_AGENT_*`` and ``OPENAI_*`` variables are not passed on.
        The process is killed on exit if it still runs, and its pipe closed.
    """
    return hub_process_with(personas_dir, data_dir, {}, **settings)


@contextmanager
def hub_process_with(
    personas_dir: Path, data_dir: Path, environ: Mapping[str, str], /, **settings: str
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """:func:`hub_process`, with ``environ``: other variables of the process
    (``PYTHONPATH``, say)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERSONA_AGENT_", "OPENAI_"))}
    if "DATABASE_URL" not in {name.upper() for name in settings} | {
        name.removeprefix("PERSONA_AGENT_") for name in environ
    }:
        # A new data directory starts with the worker's migrated database file: the hub
        # finds it at the newest revision (tests/migrated.py; migrating costs a process
        # ~0.4 s of CPU, Alembic's import included).
        WORKER_SQLITE.into(data_dir)
    env["PERSONA_AGENT_DATA_DIR"] = str(data_dir)
    env["PERSONA_AGENT_WATCH_PERSONAS"] = "false"
    env.update({f"PERSONA_AGENT_{name.upper()}": value for name, value in settings.items()})
    env.update(environ)
    command = [sys.executable, "-m", "persona_agent.cli", "serve", "--port", str(port)]
    process = subprocess.Popen(
        [*command, "-d", str(personas_dir)],
        cwd=data_dir.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP
        while True:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass  # not listening yet
            status = process.poll()
            if status is not None or time.monotonic() > deadline:
                if status is None:
                    process.kill()
                output = process.communicate(timeout=10)[0]
                what = (
                    f"exited (status {status}) before it was ready"
                    if status is not None
                    else f"was not ready in {STARTUP:.0f} s (a hang?)"
                )
                raise AssertionError(f"the hub {what}:\n{output}")
            time.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        if process.stdout is not None and not process.stdout.closed:
            process.communicate(timeout=10)
