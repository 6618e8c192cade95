"""The fuzz suite's fake LLM and A2A hub (its counts are printed at the end of the run by
tests/conftest.py, which pytest-xdist's controller loads)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.fakes.fake_llm import FakeLLM
from tests.fuzz.budget import DEADLINE
from tests.fuzz.hub import FuzzHub, running_hub
from tests.servers.webhook import Webhook


@pytest.fixture(scope="session")
def fuzz_llm() -> Iterator[FakeLLM]:
    """The scripted LLM of every fuzzed hub: nothing scripted, so each answer echoes the
    user's message."""
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="session")
def webhook() -> Iterator[Webhook]:
    """A webhook receiver the A2A hub may call (the one host its push URL guard allows)."""
    with Webhook() as receiver:
        yield receiver


@pytest.fixture(scope="session")
def a2a_hub(
    tmp_path_factory: pytest.TempPathFactory, fuzz_llm: FakeLLM, webhook: Webhook
) -> Iterator[FuzzHub]:
    """The hub the A2A fuzzers send to: open (no keys), push notifications on."""
    root = tmp_path_factory.mktemp("a2a")
    allowed = f"127.0.0.1:{webhook.port}"
    with running_hub(root, fuzz_llm.base_url, push_allowed_hosts=allowed) as hub:
        yield hub


@dataclass(frozen=True)
class Pool:
    """What the A2A hub really has, for the fuzzers to name: tasks (of ``socrates``),
    their contexts, push configs of the first task, and the webhook URL it may call."""

    task_ids: list[str]
    context_ids: list[str]
    config_ids: list[str]
    webhook_url: str


@pytest.fixture(scope="session")
def pool(a2a_hub: FuzzHub, webhook: Webhook) -> Pool:
    url = f"{a2a_hub.url}/a2a/socrates/"
    headers = {"A2A-Version": "1.0"}
    tasks: list[dict[str, object]] = []
    for immediately in (False, True, False):
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        body = {
            "jsonrpc": "2.0",
            "id": len(tasks),
            "method": "SendMessage",
            "params": {"message": message, "configuration": {"returnImmediately": immediately}},
        }
        answer = httpx.post(url, json=body, headers=headers, timeout=DEADLINE).json()
        tasks.append(answer["result"]["task"])
    hook = f"{webhook.url}/fuzz"
    config = {
        "jsonrpc": "2.0",
        "id": "config",
        "method": "CreateTaskPushNotificationConfig",
        "params": {"taskId": tasks[0]["id"], "id": "fuzz-config", "url": hook, "token": "t"},
    }
    created = httpx.post(url, json=config, headers=headers, timeout=DEADLINE)
    assert "result" in created.json(), created.text
    return Pool(
        task_ids=[str(task["id"]) for task in tasks],
        context_ids=[str(task["contextId"]) for task in tasks],
        config_ids=["fuzz-config"],
        webhook_url=hook,
    )
