"""A persona write killed midway (SIGKILL) leaves nothing a later start trips over: the
next start removes the temporary file and serves the last complete version.

The write is stopped where a crash hurts most, deterministically: the real ``serve``
process runs with an audit hook (``sitecustomize``, a Python feature, no code of the hub
changed) that, when the store is about to rename its temporary file over the persona's
file, says so on the process's output and blocks. The test then kills the process with
SIGKILL, as a crash or the OOM killer would.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.personas import persona_data
from tests.security import OFFLINE_LLM, UPLOAD
from tests.servers.hub_process import hub_process

API = "/api/v1/personas"
PAUSED = "CRASH-TEST: about to rename "

# Imported by every Python started with its directory on PYTHONPATH; acts only where
# PERSONA_AGENT_CRASH_TEST is set (the hub under test).
SITECUSTOMIZE = f"""\
import os
import sys
import threading

if os.environ.pop("PERSONA_AGENT_CRASH_TEST", None):

    def _pause_before_rename(event, args):
        if event == "os.rename" and str(args[0]).endswith(".tmp"):
            os.write(2, ("{PAUSED}" + os.path.basename(str(args[0])) + "\\n").encode())
            threading.Event().wait()  # until the process is killed

    sys.addaudithook(_pause_before_rename)
"""

Write = Callable[[str], httpx.Response]


def create(url: str) -> httpx.Response:
    return httpx.post(f"{url}{API}", json={"id": "zeno", **persona_data(name="Zeno")})


def replace(url: str) -> httpx.Response:
    return httpx.put(f"{url}{API}/socrates", json=persona_data(name="Socrates Rewritten"))


def upload(url: str) -> httpx.Response:
    text = f"name: Socrates Rewritten\n{_rest_of_persona()}"
    files = {"file": ("socrates.yaml", text.encode(), "application/yaml")}
    return httpx.post(f"{url}{API}/upload?replace=true", files=files, headers=UPLOAD)


def _rest_of_persona() -> str:
    return (
        "description: A persona made for tests.\n"
        "personal_background: Written to be killed midway.\n"
        "language_style: {tone: plain}\n"
        "knowledge_domains: {Testing: [crashes]}\n"
    )


def wait_for_pause(process: subprocess.Popen[str]) -> str:
    """The name of the temporary file the paused hub was about to rename."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(PAUSED):
                lines.put(line.removeprefix(PAUSED).strip())
                return
        lines.put(None)  # the process ended without pausing

    threading.Thread(target=read, daemon=True).start()
    name = lines.get(timeout=60)
    assert name is not None, "the hub ended without reaching the rename"
    return name


@pytest.mark.parametrize(
    ("write", "persona_id", "served_after"),
    [
        pytest.param(create, "zeno", None, id="create"),
        pytest.param(replace, "socrates", "Socrates", id="replace"),
        pytest.param(upload, "socrates", "Socrates", id="upload"),
    ],
)
def test_a_write_killed_before_its_rename_leaves_the_last_whole_version(
    tmp_path: Path,
    personas_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    write: Write,
    persona_id: str,
    served_after: str | None,
) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(hooks))
    data_dir = tmp_path / "data"
    before = {path.name: path.read_bytes() for path in personas_dir.iterdir()}

    crashing = hub_process(personas_dir, data_dir, CRASH_TEST="1", **OFFLINE_LLM)
    with crashing as (url, process), ThreadPoolExecutor(1) as pool:
        answer: Future[httpx.Response] = pool.submit(write, url)
        temporary = wait_for_pause(process)
        process.kill()  # SIGKILL: no handler, no clean-up runs
        process.wait(timeout=30)
        with pytest.raises(httpx.TransportError):
            answer.result(timeout=60)

    # What the crash left: the whole new text in a hidden temporary file, and the
    # persona's own file as it was.
    assert re.fullmatch(rf"\.{persona_id}\.yaml\.[^.]+\.tmp", temporary)
    left = personas_dir / temporary
    assert "Zeno" in left.read_text("utf-8") or "Rewritten" in left.read_text("utf-8")
    assert {path.name: path.read_bytes() for path in personas_dir.iterdir() if path != left} == (
        before
    )

    monkeypatch.delenv("PYTHONPATH")
    with hub_process(personas_dir, data_dir, **OFFLINE_LLM) as (url, process):
        reply = httpx.get(f"{url}{API}/{persona_id}")
        if served_after is None:
            assert reply.status_code == 404
        else:
            assert reply.json()["name"] == served_after
        assert not left.exists()
        process.terminate()
        output = process.communicate(timeout=30)[0]
    assert f"Removed {temporary}, left by a persona write that was interrupted" in output
    assert "Traceback" not in output
