"""A deleted persona takes its tasks and conversations with it: a new persona given its id
finds none of them (a real ``persona-agent serve``; before, it inherited both)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.personas import BUNDLED, persona_data
from tests.servers.hub_process import hub_process

V1 = {"A2A-Version": "1.0"}
TASK_NOT_FOUND = -32001


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = httpx.post(f"{url}/a2a/socrates/", json=body, headers=V1, timeout=30)
    result: dict[str, Any] = reply.json()
    return result


def say(url: str, text: str, context_id: str) -> dict[str, Any]:
    message = {
        "messageId": str(uuid.uuid4()),
        "contextId": context_id,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    task: dict[str, Any] = rpc(url, "SendMessage", {"message": message})["result"]["task"]
    return task


def test_a_persona_recreated_with_a_deleted_ones_id_inherits_nothing(tmp_path: Path) -> None:
    personas_dir = tmp_path / "personas"
    shutil.copytree(BUNDLED, personas_dir)
    context_id = str(uuid.uuid4())
    with FakeLLM() as llm:
        settings = {"LLM_BASE_URL": llm.base_url, "LLM_API_KEY": "k", "LLM_MAX_RETRIES": "0"}
        with hub_process(personas_dir, tmp_path / "data", **settings) as (url, _):
            llm.script(Reply("The unexamined life is not worth living."))
            first = say(url, "My secret plan is X.", context_id)
            assert first["status"]["state"] == "TASK_STATE_COMPLETED"

            assert httpx.delete(f"{url}/api/v1/personas/socrates").status_code == 204
            new = {"id": "socrates", **persona_data(name="Another Socrates")}
            assert httpx.post(f"{url}/api/v1/personas", json=new).status_code == 201

            assert rpc(url, "GetTask", {"id": first["id"]})["error"]["code"] == TASK_NOT_FOUND
            listed = rpc(url, "ListTasks", {"contextId": context_id})["result"]
            assert listed.get("tasks", []) == []
            llm.reset()
            llm.script(Reply("Who are you?"))
            second = say(url, "Do you remember me?", context_id)
            assert second["status"]["state"] == "TASK_STATE_COMPLETED"
            (request,) = llm.requests
            sent = str(request["messages"])
            assert "My secret plan" not in sent
            assert "unexamined life" not in sent

        # And after a restart, from the database.
        with hub_process(personas_dir, tmp_path / "data", **settings) as (url, _):
            assert rpc(url, "GetTask", {"id": first["id"]})["error"]["code"] == TASK_NOT_FOUND
            listed = rpc(url, "ListTasks", {"contextId": context_id})["result"]
            assert [task["id"] for task in listed["tasks"]] == [second["id"]]
