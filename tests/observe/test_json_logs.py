"""JSON logs (PERSONA_AGENT_LOG_FORMAT=json): one object per line from a real
``persona-agent serve``, uvicorn's access lines included, each with its request id and
persona, the task's lines with the task, and secrets redacted as in text lines."""

from __future__ import annotations

import json
import logging
import shutil
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from persona_agent.observe.logs import LOG_FIELDS, REDACTED, JsonFormatter, bind_log_fields
from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.personas import BUNDLED
from tests.servers.hub_process import hub_process

HUB_KEY = "hub-key-for-json-logs-5678"


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def _send(url: str, text: str, request_id: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    headers = {"A2A-Version": "1.0", "X-Request-Id": request_id}
    reply = httpx.post(f"{url}/a2a/socrates/", json=body, headers=headers, timeout=60)
    task: dict[str, Any] = reply.json()["result"]["task"]
    return task


def test_a_served_hub_logs_one_json_object_per_line(tmp_path: Path, llm: FakeLLM) -> None:
    personas_dir = tmp_path / "personas"
    shutil.copytree(BUNDLED, personas_dir)
    settings = {
        "LOG_FORMAT": "json",
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-json-logs-secret-1234",
        "LLM_MAX_RETRIES": "0",
        "API_KEYS": HUB_KEY,
    }
    with hub_process(personas_dir, tmp_path / "data", **settings) as (url, process):
        lines: list[str] = []
        assert process.stdout is not None
        drain = threading.Thread(target=lines.extend, args=(process.stdout,), daemon=True)
        drain.start()
        llm.script(Reply("Know thyself."), Fail(500, f"a proxy echoed {HUB_KEY}"))
        done = _send(url, "Who are you?", "req-ok-1")
        failed = _send(url, "Again?", "req-fail-2")
        process.terminate()
        process.wait(timeout=30)
        drain.join(timeout=30)

    entries = [json.loads(line) for line in lines if line.strip()]  # every line is JSON
    assert entries
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    # uvicorn's access line of each request carries its request id and persona.
    access = [e for e in entries if e["logger"] == "uvicorn.access"]
    assert {(e.get("request_id"), e.get("persona")) for e in access} >= {
        ("req-ok-1", "socrates"),
        ("req-fail-2", "socrates"),
    }
    # The failed task's warning names the request, the persona, the task and its context.
    warning = next(e for e in entries if e["level"] == "WARNING" and "failed" in e["message"])
    assert warning["request_id"] == "req-fail-2"
    assert warning["persona"] == "socrates"
    assert warning["task"] == failed["id"]
    assert warning["context"] == failed["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    # Secrets are redacted inside the JSON, as in text lines.
    assert not any("sk-json-logs-secret-1234" in line or HUB_KEY in line for line in lines)
    assert REDACTED in warning["message"]


def test_the_formatter_adds_bound_fields_and_the_traceback() -> None:
    formatter = JsonFormatter(secrets=["hunter22"])
    token = bind_log_fields(request_id="r-1", persona="ada", task=None)
    try:
        raise ValueError("password hunter22 rejected")
    except ValueError:
        record = logging.LogRecord(
            "persona_agent.x",
            logging.ERROR,
            __file__,
            1,
            "it broke: %s",
            ("hunter22",),
            sys.exc_info(),
        )
        entry = json.loads(formatter.format(record))
    finally:
        LOG_FIELDS.reset(token)
    assert entry["message"] == f"it broke: {REDACTED}"
    assert entry["request_id"] == "r-1"
    assert entry["persona"] == "ada"
    assert "task" not in entry  # a field bound as None is left out
    assert "ValueError" in entry["exception"]
    assert "hunter22" not in entry["exception"]
    assert entry["level"] == "ERROR"
    assert entry["time"].endswith("+00:00")
    assert LOG_FIELDS.get() == {}  # reset
