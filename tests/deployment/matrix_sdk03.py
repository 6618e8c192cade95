"""The a2a-sdk 0.3 client of the matrix: its own environment (made once, outside the project's),
tests/deployment/sdk03_client.py run in it, and its reports judged in 0.3's terms.

``python -m tests.deployment.matrix_sdk03`` makes the environment (``.ci/run`` does, ahead of
pytest); the tests make it when it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.deployment.matrix import Cell
from tests.deployment.matrix_hubs import FULL_KEY, LIMITED_KEY, Deployment

__all__ = ["SDK03", "assert_sdk03_cell", "run_sdk03", "sdk03_python", "tool_cache"]

SDK03 = "a2a-sdk[http-server]==0.3.26"
"""The 0.3 client: the last 0.3 release."""
SCRIPT = Path(__file__).with_name("sdk03_client.py")
ENV_VARIABLE = "PERSONA_AGENT_TEST_SDK03_ENV"
# Read at import, before tests/conftest.py clears PERSONA_AGENT_* for each test.
_NAMED_ENV = os.environ.get(ENV_VARIABLE, "")


def tool_cache() -> Path:
    """Where the matrix keeps the clients it installs: ``~/.cache/persona-agent-tests``
    (``$XDG_CACHE_HOME`` if set)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "persona-agent-tests"


def environment() -> Path:
    """Where the 0.3 environment lives: ``PERSONA_AGENT_TEST_SDK03_ENV``, else
    ``a2a-sdk-0.3.26`` in :func:`tool_cache`."""
    return Path(_NAMED_ENV) if _NAMED_ENV else tool_cache() / "a2a-sdk-0.3.26"


def _uv() -> list[str]:
    found = shutil.which("uv")
    return [found] if found else [sys.executable, "-m", "uv"]


def sdk03_python() -> Path:
    """The 0.3 environment's Python, the environment made first if it is missing (``uv venv``
    and ``uv pip install``: a minute at most, from the package index or uv's cache)."""
    env = environment()
    python = env / "bin" / "python"
    if python.exists():
        return python
    partial = env.with_name(env.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run([*_uv(), "venv", "--quiet", str(partial)], check=True, timeout=300)
    subprocess.run(
        [*_uv(), "pip", "install", "--quiet", "--python", str(partial / "bin" / "python"), SDK03],
        check=True,
        timeout=600,
    )
    shutil.rmtree(env, ignore_errors=True)
    partial.rename(env)  # whole, or absent (only bin/python is used: it moves freely)
    return python


def run_sdk03(python: Path, deployment: Deployment, cell: Cell, operations: list[str]) -> Any:
    """Run ``operations`` of ``cell``'s door and target in the 0.3 client; its report."""
    job = {
        "here": deployment.here(),
        "there": deployment.there(),
        "public": deployment.public,
        "target": cell.persona_id,
        "binding": cell.door.binding[0],
        "key": FULL_KEY,
        "limited_key": LIMITED_KEY,
        "operations": operations,
    }
    done = subprocess.run(
        [str(python), str(SCRIPT)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def _one_final(seen: dict[str, Any], state: str) -> None:
    """A 0.3 stream ends with exactly one final status-update, in ``state``."""
    assert "error" not in seen, seen
    finals = [e for e in seen["events"] if e.endswith(":final")]
    assert finals == [f"status-update:{state}:final"], seen["events"]
    assert seen["events"][-1] == finals[0], seen["events"]


def assert_sdk03_cell(cell: Cell, seen: dict[str, Any], speakers: list[str]) -> None:
    """What the 0.3 client saw, judged for ``cell.operation``."""
    operation = cell.operation
    if operation in ("send", "stream"):
        assert seen.get("state") == "completed", seen
        for who in speakers:
            assert f"Answer from {who}." in seen.get("answer", ""), seen
        if operation == "stream":
            _one_final(seen, "completed")
            assert "artifact-update" in seen["events"], seen
    elif operation in ("cancel-same", "cancel-other"):
        assert seen.get("canceled") == "canceled", seen
        _one_final(seen, "canceled")
        assert seen["state"] == "canceled", seen
    elif operation == "resubscribe":
        assert seen["events"][0] == "task", seen
        _one_final(seen, "completed")
    elif operation == "refused":
        assert "HTTP Error 403" in seen["limited"], seen
        assert "HTTP Error 401" in seen["none"], seen
    elif operation == "failing":
        assert seen.get("state") == "failed", seen
        assert "500" in seen["text"] or "did not answer" in seen["text"], seen
        assert "Traceback" not in seen["text"], seen
    else:
        raise AssertionError(f"no 0.3 cell for {operation}")


if __name__ == "__main__":
    print(sdk03_python())
