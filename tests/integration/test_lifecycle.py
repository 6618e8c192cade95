"""One task lifecycle for every executor: a panel's task lives as a persona's does (its
failures, cancel, audit records and metrics), through real A2A clients."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, Message, Part, Role, SendMessageRequest, TaskState

from tests.fakes.fake_llm import FakeLLM, Hang
from tests.integration.a2a_helpers import status_text, submit
from tests.integration.conftest import HubFactory
from tests.integration.test_metrics import scrape, value

# A persona and a panel (the bundled broadcast panel of three), with the logger of the
# executor answering each and the model calls one message makes.
EXECUTORS = [
    pytest.param("socrates", "persona_agent.a2a.tasks.executor", 1, id="persona"),
    pytest.param("science-panel", "persona_agent.collab.panel_executor", 3, id="panel"),
]


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def unreadable_file() -> SendMessageRequest:
    """A message whose one part passes the handler's check (an inline text file) and cannot
    be read (not UTF-8): a domain error (``DocumentError``) once the task runs."""
    part = Part(raw=b"caf\xe9 \xff", media_type="text/plain", filename="notes.txt")
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id="m-unreadable", parts=[part])
    )


@pytest.mark.parametrize(("persona_id", "logger", "calls"), EXECUTORS)
async def test_a_domain_error_fails_the_task_with_its_message_and_a_reference(
    hub_factory: HubFactory,
    llm: FakeLLM,
    caplog: pytest.LogCaptureFixture,
    persona_id: str,
    logger: str,
    calls: int,
) -> None:
    with caplog.at_level(logging.WARNING, logger="persona_agent"):
        async with hub_factory() as hub:
            client = await hub.client(persona_id)
            (response,) = [r async for r in client.send_message(unreadable_file())]
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_FAILED
    # The client reads what was wrong, and where the log says more: as for a persona.
    told = re.fullmatch(
        r"Part 0 \(notes\.txt\): not UTF-8 text \(byte 3\): save it as UTF-8 "
        r"\(reference ([0-9a-f]{12}): see the hub's log\)",
        status_text(task),
    )
    assert told is not None, status_text(task)
    # One WARNING of the executor's with the reference and the detail; no traceback.
    (logged,) = [r for r in caplog.records if told.group(1) in r.getMessage()]
    assert (logged.name, logged.levelno, logged.exc_info) == (logger, logging.WARNING, None)
    assert f"{persona_id}, task {task.id} failed" in logged.getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert llm.requests == []  # nobody was asked a message nobody could read


@pytest.mark.parametrize(("persona_id", "logger", "calls"), EXECUTORS)
async def test_a_canceled_task_is_audited_and_counted(
    hub_factory: HubFactory,
    llm: FakeLLM,
    tmp_path: Path,
    persona_id: str,
    logger: str,
    calls: int,
) -> None:
    log = tmp_path / "audit.jsonl"
    llm.script(*[Hang()] * calls)
    async with hub_factory(audit_log=str(log)) as hub:
        client = await hub.client(persona_id)
        task_id = await submit(client, "Take your time.")
        await asyncio.to_thread(llm.wait_requests, calls, 5.0)  # answering now
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        assert status_text(canceled) == "Canceled at the client's request"
        # The executor counts the task when the SDK has stopped it (a bounded wait).
        async with asyncio.timeout(60):
            while True:
                samples = await scrape(hub)
                tasks = value(
                    samples, "persona_agent_tasks_total", persona=persona_id, state="canceled"
                )
                if tasks == 1:
                    break
                await asyncio.sleep(0.05)
        assert value(samples, "persona_agent_tasks_running", persona=persona_id) == 0
        seconds = "persona_agent_task_duration_seconds_count"
        assert value(samples, seconds, persona=persona_id, state="canceled") == 1
    lines = log.read_text(encoding="utf-8").splitlines()
    # (A panel's members' tasks are audited too, each under its member.)
    records = [r for r in map(json.loads, lines) if r["persona"] == persona_id]
    audited = [(r["action"], r["taskId"]) for r in records]
    assert audited == [("task.create", task_id), ("task.cancel", task_id)]
    assert records[0]["principal"] == "anonymous"
    assert records[0]["contextId"] == canceled.context_id
