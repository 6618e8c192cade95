"""LLM failures end the task failed with a useful message; the server keeps serving."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.fakes.fake_llm import Fail, FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send, status_text
from tests.integration.conftest import TRANSPORTS, Hub


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_llm_error_fails_the_task_and_the_hub_keeps_serving(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    llm.script(Fail(status=500, message="model exploded"))
    client = await hub.client("socrates", transport)
    failed = await send(client, "Hello?")
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    reason = status_text(failed)
    assert "500" in reason
    assert "Traceback" not in reason

    llm.script(Reply("Still here."))
    ok = await send(client, "Hello again?")
    assert ok.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(ok) == "Still here."


async def test_unreachable_llm_fails_with_a_useful_message(hub_factory) -> None:  # type: ignore[no-untyped-def]
    async with hub_factory(llm_base_url="http://127.0.0.1:9/v1") as hub:
        client = await hub.client("socrates")
        task = await send(client, "Hello?")
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "could not be reached" in status_text(task)
