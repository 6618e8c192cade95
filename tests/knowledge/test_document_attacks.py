"""Issue 46.7 and 46.9 as the attack, through the real hub (uvicorn, the a2a-sdk client,
the scripted fake OpenAI server): PDFs that cost minutes of CPU while an image message is
answered meanwhile; a canceled task's reading ended with it; an upload over a reading
limit refused with a 413 naming it; a PDF nested past any stack failing its task with a
message that says so (not "Internal error")."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from persona_agent.api.app import HubApp
from persona_agent.knowledge.reader_pool import ReaderProcesses
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import TERMINAL, get_task, status_text
from tests.integration.conftest import Hub, HubFactory
from tests.integration.persona_yaml import persona, write
from tests.knowledge.pdfs import nested_pdf, shared_stream_pdf
from tests.knowledge.processes import gone
from tests.media.images import image_bytes

SAFETY = 120  # seconds: a bound on a hung test, not a measure (the machine may be busy)
SLOW = shared_stream_pdf(500)
"""Minutes of CPU to read whole; some 13 s of a fast core before the character limit."""


@pytest.fixture
def mcp_config_file() -> None:
    return None  # no MCP servers: no test here calls a tool


@pytest.fixture
def personas_dir(personas_dir: Path) -> Path:
    write(personas_dir, "iris", persona("Iris", model={"name": "llama3", "vision": True}))
    return personas_dir


def request(*parts: Part, immediately: bool = False) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts)
    sent = SendMessageRequest(message=message)
    sent.configuration.return_immediately = immediately
    return sent


def pdf_part(data: bytes, name: str = "slow.pdf") -> Part:
    return Part(raw=data, media_type="application/pdf", filename=name)


def readers_of(hub: Hub) -> ReaderProcesses:
    assert isinstance(hub.app, HubApp)
    reader = hub.app.parts.knowledge.reader
    assert isinstance(reader, ReaderProcesses)
    return reader


async def test_an_image_message_is_answered_while_pdfs_are_read(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    """Eight slow PDFs: more than the default executor's threads on this machine (six on
    two cores), which reading them took before, so that an image waited 91 s. The
    documents wait for the hub's reader processes; the image does not wait for them."""
    llm.script(Reply("A grey gradient."))
    async with asyncio.timeout(SAFETY), hub_factory(vision_models="*") as hub:
        readers = readers_of(hub)
        socrates = await hub.client("socrates")
        slow: list[str] = []
        for index in range(8):
            sent = request(
                Part(text="Read this."), pdf_part(SLOW, f"slow-{index}.pdf"), immediately=True
            )
            slow.append([r async for r in socrates.send_message(sent)][-1].task.id)
        while readers.reading < readers.workers:  # noqa: ASYNC110 (the pool's own state)
            await asyncio.sleep(0.05)
        iris = await hub.client("iris")
        image = Part(raw=image_bytes("PNG", (16, 16)), media_type="image/png", filename="a.png")
        answered = [r async for r in iris.send_message(request(Part(text="What is it?"), image))]
        assert answered[-1].task.status.state == TaskState.TASK_STATE_COMPLETED
        # ... while every document was still being read, or waiting for a reader.
        states = [(await get_task(socrates, task_id)).status.state for task_id in slow]
        assert not TERMINAL.intersection(states), states
        assert readers.reading == readers.workers
        pids = readers.pids
        for task_id in slow:
            await socrates.cancel_task(CancelTaskRequest(id=task_id))
        await gone(pids)
        assert readers.reading == 0


async def test_canceling_the_task_ends_its_reading(hub_factory: HubFactory) -> None:
    async with asyncio.timeout(SAFETY), hub_factory() as hub:
        readers = readers_of(hub)
        client = await hub.client("socrates")
        sent = request(Part(text="Read this."), pdf_part(SLOW), immediately=True)
        task_id = [r async for r in client.send_message(sent)][-1].task.id
        while readers.reading == 0:  # noqa: ASYNC110 (the pool's own state)
            await asyncio.sleep(0.05)
        [pid] = readers.pids
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await gone([pid])  # its CPU work is over, not left running in a thread
        assert (readers.reading, readers.pids) == (0, [])


async def test_an_upload_over_a_reading_limit_gets_a_413_naming_it_and_the_hub_ends_its_readers(
    hub_factory: HubFactory,
) -> None:
    async with asyncio.timeout(SAFETY), hub_factory(document_max_chars=10_000) as hub:
        response = await hub.http.post(
            "/api/v1/personas/socrates/documents",
            headers={"X-Requested-With": "tests"},
            files={"file": ("slow.pdf", SLOW, "application/pdf")},
        )
        assert response.status_code == 413, response.text
        assert response.json()["detail"] == (
            "slow.pdf: the PDF is over a limit: its text is longer than 10,000 characters "
            "(PERSONA_AGENT_DOCUMENT_MAX_CHARS)"
        )
        listed = await hub.http.get("/api/v1/personas/socrates/documents")
        assert listed.json()["documents"] == []
        idle = readers_of(hub).pids  # stopped by its own limit: kept for the next one
        assert len(idle) == 1
    await gone(idle)  # the hub stopped: so did its readers


async def test_a_pdf_nested_past_any_stack_fails_its_task_saying_so(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    async with asyncio.timeout(SAFETY), hub_factory() as hub:
        client = await hub.client("socrates")
        sent = request(Part(text="Read this."), pdf_part(nested_pdf(200_000), "deep.pdf"))
        task = [r async for r in client.send_message(sent)][-1].task
        assert task.status.state == TaskState.TASK_STATE_FAILED
        text = status_text(task)
        assert text.startswith(
            "Part 1 (deep.pdf): the PDF nests its objects (arrays, dictionaries, pages) too "
            "deeply to be read"
        ), text
        assert "Internal error" not in text
        assert llm.requests == []
