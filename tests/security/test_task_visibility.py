"""Without authentication, a caller lists only the tasks of a conversation it knows, and
ids have length limits: a real ``persona-agent serve`` over JSON-RPC and HTTP+JSON.

Before: ListTasks returned every anonymous client's tasks with their history, and anyone
could then continue those conversations."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.personas import BUNDLED
from tests.servers.hub_process import hub_process

V1 = {"A2A-Version": "1.0"}
INVALID_PARAMS = -32602
UNSUPPORTED_OPERATION = -32004


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def start(tmp_path: Path, llm: FakeLLM, **settings: str) -> Any:
    personas_dir = tmp_path / "personas"
    llm.reset()
    if not personas_dir.exists():
        shutil.copytree(BUNDLED, personas_dir)
    llm_settings = {"LLM_BASE_URL": llm.base_url, "LLM_API_KEY": "k", "LLM_MAX_RETRIES": "0"}
    return hub_process(personas_dir, tmp_path / "data", **llm_settings, **settings)


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply: dict[str, Any] = httpx.post(
        f"{url}/a2a/socrates/", json=body, headers=V1, timeout=30
    ).json()
    return reply


def message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def test_a_caller_lists_only_the_tasks_of_a_context_it_names(tmp_path: Path, llm: FakeLLM) -> None:
    with start(tmp_path, llm) as (url, _):
        llm.script(Reply("Mine."), Reply("Theirs."))
        mine = rpc(url, "SendMessage", {"message": message("Hello")})["result"]["task"]
        theirs = rpc(url, "SendMessage", {"message": message("Hi")})["result"]["task"]

        everything = rpc(url, "ListTasks", {})
        assert everything["error"]["code"] == INVALID_PARAMS
        assert "needs a contextId" in everything["error"]["message"]
        rest = httpx.get(f"{url}/a2a/socrates/tasks", headers=V1)
        assert rest.status_code == 400
        assert "needs a contextId" in rest.text

        listed = rpc(url, "ListTasks", {"contextId": mine["contextId"]})["result"]["tasks"]
        assert [task["id"] for task in listed] == [mine["id"]]
        assert theirs["id"] not in str(listed)
        stranger = rpc(url, "ListTasks", {"contextId": str(uuid.uuid4())})["result"]
        assert stranger.get("tasks", []) == []


def test_listing_can_be_turned_off_or_opened(tmp_path: Path, llm: FakeLLM) -> None:
    with start(tmp_path, llm, TASK_LISTING="off") as (url, _):
        llm.script(Reply("Once."))
        task = rpc(url, "SendMessage", {"message": message("Hello")})["result"]["task"]
        refused = rpc(url, "ListTasks", {"contextId": task["contextId"]})
        assert refused["error"]["code"] == UNSUPPORTED_OPERATION
        assert "PERSONA_AGENT_TASK_LISTING=off" in refused["error"]["message"]
    with start(tmp_path, llm, TASK_LISTING="all") as (url, _):
        listed = rpc(url, "ListTasks", {})["result"]["tasks"]
        assert [t["id"] for t in listed] == [task["id"]]


@pytest.fixture(scope="module")
def listing_hub(tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM) -> Iterator[str]:
    """One hub listing every task, for the cases of the id limits (a process takes seconds
    of CPU to start): each is refused, so the hub stays without a task, which each checks."""
    with start(tmp_path_factory.mktemp("id-limits"), llm, TASK_LISTING="all") as (url, _):
        yield url


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("SendMessage", {"message": message("x", contextId="c" * 129)}, "contextId"),
        ("SendMessage", {"message": message("x", messageId="m" * 129)}, "messageId"),
        ("SendMessage", {"message": message("x", taskId="t" * 129)}, "taskId"),
        (
            "SendMessage",
            {"message": message("x", referenceTaskIds=["r" * 129])},
            "referenceTaskIds",
        ),
        ("GetTask", {"id": "t" * 10_000}, "id"),
        ("CancelTask", {"id": "t" * 129}, "id"),
        ("ListTasks", {"contextId": "c" * 129}, "contextId"),
    ],
)
def test_ids_longer_than_the_limit_are_invalid_params_and_never_stored(
    listing_hub: str, llm: FakeLLM, method: str, params: dict[str, Any], field: str
) -> None:
    url = listing_hub
    llm.reset()  # the cases share the hub: what the model is asked is this case's
    error = rpc(url, method, params)["error"]
    assert error["code"] == INVALID_PARAMS
    assert error["message"].startswith(field)
    assert error["message"].endswith(" is longer than 128 characters")
    assert rpc(url, "ListTasks", {})["result"].get("tasks", []) == []
    assert llm.requests == []
