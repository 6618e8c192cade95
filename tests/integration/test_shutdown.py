"""SIGTERM with tasks in flight: running tasks finish within the grace period,
the rest end canceled (a real ``persona-agent serve`` process)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.fake_llm import FakeLLM, Hang, Reply


@contextmanager
def hub_process(
    personas_dir: Path, data_dir: Path, llm: FakeLLM, grace: float
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PERSONA_AGENT_", "OPENAI_"))}
    env.update(
        PERSONA_AGENT_DATA_DIR=str(data_dir),
        PERSONA_AGENT_LLM_BASE_URL=llm.base_url,
        PERSONA_AGENT_LLM_API_KEY="test",
        PERSONA_AGENT_LLM_MAX_RETRIES="0",
        PERSONA_AGENT_SHUTDOWN_GRACE_SECONDS=str(grace),
        PERSONA_AGENT_WATCH_PERSONAS="false",
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "persona_agent.cli",
            "serve",
            "--port",
            str(port),
            "-d",
            str(personas_dir),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                break
        except httpx.TransportError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise AssertionError(f"hub did not start: {process.communicate()[0]}") from None
            time.sleep(0.1)
    try:
        yield url, process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)  # reaps it and closes the pipe


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(
        f"{url}/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    )
    result: dict[str, Any] = response.json()["result"]
    return result


def submit(url: str) -> str:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "Hello"}]}
    result = rpc(
        url, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
    )
    task_id: str = result["task"]["id"]
    return task_id


def terminate(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    return output


def test_a_running_task_finishes_within_the_grace_period(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM
) -> None:
    words = [f"w{i} " for i in range(10)]
    llm.script(Reply("".join(words), chunks=words, token_delay=0.1))
    with hub_process(personas_dir, tmp_path / "data", llm, grace=10) as (url, process):
        task_id = submit(url)
        llm.wait_requests(1)
        output = terminate(process)
    # uvicorn re-raises the SIGTERM it handled once it has shut down cleanly.
    assert process.returncode in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in output, output

    with hub_process(personas_dir, tmp_path / "data", llm, grace=10) as (url, process):
        task = rpc(url, "GetTask", {"id": task_id})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", (output, task)
        terminate(process)


def test_tasks_still_running_after_the_grace_period_are_canceled(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM
) -> None:
    llm.script(Hang())
    with hub_process(personas_dir, tmp_path / "data", llm, grace=1) as (url, process):
        task_id = submit(url)
        llm.wait_requests(1)
        output = terminate(process)
    assert "Canceling task" in output
    llm.wait_disconnect()

    with hub_process(personas_dir, tmp_path / "data", llm, grace=1) as (url, process):
        task = rpc(url, "GetTask", {"id": task_id})
        assert task["status"]["state"] == "TASK_STATE_CANCELED"
        terminate(process)
