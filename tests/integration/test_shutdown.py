"""SIGTERM with tasks in flight: running tasks finish within the grace period,
the rest end canceled (a real ``persona-agent serve`` process)."""

from __future__ import annotations

import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.fake_llm import FakeLLM, Hang, Reply
from tests.servers.hub_process import hub_process


def hub(personas_dir: Path, data_dir: Path, llm: FakeLLM, grace: float) -> Any:
    return hub_process(
        personas_dir,
        data_dir,
        LLM_BASE_URL=llm.base_url,
        LLM_API_KEY="test",
        LLM_MAX_RETRIES="0",
        SHUTDOWN_GRACE_SECONDS=str(grace),
    )


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
    with hub(personas_dir, tmp_path / "data", llm, grace=10) as (url, process):
        task_id = submit(url)
        llm.wait_requests(1)
        output = terminate(process)
    # uvicorn re-raises the SIGTERM it handled once it has shut down cleanly.
    assert process.returncode in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in output, output

    with hub(personas_dir, tmp_path / "data", llm, grace=10) as (url, process):
        task = rpc(url, "GetTask", {"id": task_id})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", (output, task)
        terminate(process)


def test_tasks_still_running_after_the_grace_period_are_canceled(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM
) -> None:
    llm.script(Hang())
    with hub(personas_dir, tmp_path / "data", llm, grace=1) as (url, process):
        task_id = submit(url)
        llm.wait_requests(1)
        output = terminate(process)
    assert "Canceling task" in output
    llm.wait_disconnect()

    with hub(personas_dir, tmp_path / "data", llm, grace=1) as (url, process):
        task = rpc(url, "GetTask", {"id": task_id})
        assert task["status"]["state"] == "TASK_STATE_CANCELED"
        terminate(process)


def test_tasks_a_crash_left_working_are_failed_at_the_next_start(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM
) -> None:
    llm.script(Hang())
    with hub(personas_dir, tmp_path / "data", llm, grace=10) as (url, process):
        task_id = submit(url)
        llm.wait_requests(1)
        process.kill()  # SIGKILL: no shutdown at all
        process.wait(timeout=10)

    with hub(personas_dir, tmp_path / "data", llm, grace=10) as (url, process):
        task = rpc(url, "GetTask", {"id": task_id})
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        assert "stopped before this task finished" in task["status"]["message"]["parts"][0]["text"]
        terminate(process)
