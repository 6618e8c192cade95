"""Tasks and conversations survive a restart; tasks are isolated per persona."""

from __future__ import annotations

import uuid

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, TaskState
from a2a.utils.errors import MethodNotFoundError, TaskNotFoundError

from tests.conftest import empty_postgres
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, get_task, send
from tests.integration.conftest import TRANSPORTS, HubFactory


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tasks_and_conversations_survive_a_restart(
    hub_factory: HubFactory, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    await survive_a_restart(hub_factory, llm, transport)


async def test_on_postgresql_tasks_and_conversations_survive_a_restart(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    url = await empty_postgres()
    await survive_a_restart(hub_factory, llm, ("JSONRPC", "1.0"), database_url=url)


async def survive_a_restart(
    hub_factory: HubFactory, llm: FakeLLM, transport: tuple[str, str], **settings: str
) -> None:
    context_id = str(uuid.uuid4())
    async with hub_factory(**settings) as hub:
        llm.script(Reply("The radium glows faintly."))
        client = await hub.client("marie-curie", transport)
        first = await send(client, "What glows?", context_id)

    async with hub_factory(**settings) as hub:
        client = await hub.client("marie-curie", transport)
        stored = await get_task(client, first.id)
        assert stored.status.state == TaskState.TASK_STATE_COMPLETED
        assert answer_text(stored) == "The radium glows faintly."

        llm.script(Reply("I said the radium glows."))
        await send(client, "What did you say?", context_id)
        conversation = [m for m in llm.requests[-1]["messages"] if m["role"] != "system"]
        assert conversation[:2] == [
            {"role": "user", "content": "What glows?"},
            {"role": "assistant", "content": "The radium glows faintly."},
        ]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_task_is_not_found_through_another_persona(
    hub_factory: HubFactory, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    async with hub_factory() as hub:
        einstein = await hub.client("albert-einstein", transport)
        curie = await hub.client("marie-curie", transport)
        task = await send(einstein, "Hello Albert")
        # The SDK's v0.3 REST client reads the v1.0 error body of a 404 as "method not found".
        expected = MethodNotFoundError if transport == ("HTTP+JSON", "0.3") else TaskNotFoundError
        with pytest.raises(expected):
            await curie.get_task(GetTaskRequest(id=task.id))
        await einstein.get_task(GetTaskRequest(id=task.id))
        if transport[1] == "0.3":
            return  # ListTasks is new in A2A 1.0
        listed = await curie.list_tasks(ListTasksRequest())
        assert task.id not in {t.id for t in listed.tasks}
        listed = await einstein.list_tasks(ListTasksRequest())
        assert task.id in {t.id for t in listed.tasks}
