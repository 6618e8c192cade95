"""The embedded local model, for real: every bundled persona answers offline, in character.

These run the real Gemma 3 270M through llama-cpp-python (no fake), behind a real
hub, through the real a2a-sdk client: one hub for the module, so the model is loaded
once (its tests run in the module's event loop). They are marked ``local_model`` so they
can be selected (``-m local_model``) or left out (``-m "not local_model"``); CI runs them.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from persona_agent.api.app import HubApp, create_app
from persona_agent.llm.local.backend import LocalBackend
from persona_agent.llm.local.weights import LOCAL_MODEL_NAME
from persona_agent.personas.scan import load_persona_dir
from tests.conftest import MODEL_THREADS
from tests.integration.a2a_helpers import answer_text, get_task, send, user_message
from tests.integration.conftest import (
    BUNDLED,
    Hub,
    HubFactory,
    loopback_socket,
    serving,
    settings_of,
)
from tests.quality import assert_reads_as_the_persona

pytestmark = pytest.mark.local_model
MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")
"""The mark of a test on :func:`local_hub`, the module's one hub."""

PERSONAS, _ = load_persona_dir(BUNDLED)
QUESTIONS = [
    "Who are you, and what do you do?",
    "What is the most important thing you have learned?",
    "What would you tell a young person who wants to follow your path?",
]
CAP = 64  # tokens: short answers keep the suite quick on two cores
KEEPER = """\
name: Maren Holt
description: The keeper of the Skerry Light, a lighthouse on a rock in the North Sea.
model: {temperature: 0, max_tokens: 4}
lore:
  entries:
    - keys: [Corvina]
      content: >-
        The Corvina was a schooner wrecked on the Skerry rocks in the great storm of 1887;
        {{char}} rowed out alone in the dark and saved four of her crew.
"""
"""A persona with a lore entry, beside the bundled ones (answers of 4 tokens: cheap)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local_hub(
    tmp_path_factory: pytest.TempPathFactory, local_model_dir: Path
) -> AsyncIterator[Hub]:
    """One hub on the real model for the module (``hub_factory``'s settings, the bundled
    personas only): the model is loaded once, not once a test."""
    root = tmp_path_factory.mktemp("local-hub")
    personas_dir = root / "personas"
    shutil.copytree(BUNDLED, personas_dir)
    (personas_dir / "keeper.yaml").write_text(KEEPER, encoding="utf-8")
    sock, base_url = loopback_socket()
    settings = settings_of(
        personas_dir=personas_dir,
        data_dir=root / "data",
        public_base_url=base_url,
        llm_backend="local",
        llm_max_retries=0,
        llm_timeout=10,
        mcp_config=None,
        shutdown_grace_seconds=2,
        task_listing="all",
        local_model_dir=local_model_dir,
        local_threads=MODEL_THREADS,
        local_max_tokens=CAP,
        local_warm_personas=0,  # the tests' own requests only (test_local_warmup.py warms)
    )
    app = create_app(settings)
    # A blocking answer from the real model on two busy cores can take well over the
    # suite's usual 30 s (one generation at a time; llama.cpp slows sharply under load).
    async with serving(app, sock), httpx.AsyncClient(base_url=base_url, timeout=300) as http:
        yield Hub(app, http, settings)


def cost_of(task: Task) -> dict[str, Any]:
    """The cost-v1 data of ``task``'s final message."""
    data = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
    (cost,) = [d for d in data if d.get("kind") == "cost-v1"]
    return cost


def completion_tokens(task: Task) -> int:
    """The tokens the model generated for ``task`` (its cost-v1 usage)."""
    return int(cost_of(task)["usage"]["completionTokens"])


def backend(hub: Hub) -> LocalBackend:
    """The hub's own backend, read (never replaced) to watch the model work."""
    assert isinstance(hub.app, HubApp)
    llm = hub.app.parts.readiness.llm
    assert isinstance(llm, LocalBackend)
    return llm


@MODULE_LOOP
@pytest.mark.parametrize(
    ("persona_id", "question"),
    # One question a persona, the three taken in turn: every persona and every question.
    [(p, QUESTIONS[n % len(QUESTIONS)]) for n, p in enumerate(sorted(PERSONAS))],
)
async def test_every_bundled_persona_answers_in_character(
    local_hub: Hub, persona_id: str, question: str
) -> None:
    persona = PERSONAS[persona_id]
    name = persona.name
    # A panel answers with its members' answers: its cost-v1 adds theirs up.
    answers = len(persona.panel.members) if persona.panel is not None else 1
    client = await local_hub.client(persona_id)
    task = await send(client, question)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
    assert len(task.artifacts) == answers
    for artifact in task.artifacts:  # a panel's: one a member, named after it
        text = "".join(part.text for part in artifact.parts)
        speaker = artifact.name if persona.panel is not None else name
        assert_reads_as_the_persona(text, speaker, CAP)
    cost = cost_of(task)
    assert cost["demoModel"] is True  # for clients to label the answer (a panel's too)
    usage = cost["usage"]
    assert usage["promptTokens"] > 50  # the transcript: persona, samples, question
    # At most one retry of an empty answer, for each answer.
    assert 0 < usage["completionTokens"] <= 2 * CAP * answers


@MODULE_LOOP
async def test_a_lore_entry_reaches_the_model_exactly_when_its_key_is_said(
    local_hub: Hub,
) -> None:
    """Two questions alike but for the entry's key, each in a new conversation: the model
    reads the entry (some 40 tokens more of prompt) with the key only."""
    client = await local_hub.client("keeper")
    said = await send(client, "What do you remember of the Corvina?")
    unsaid = await send(client, "What do you remember of the Carina?")
    for task in (said, unsaid):
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
    read = [int(cost_of(task)["usage"]["promptTokens"]) for task in (said, unsaid)]
    assert read[0] - read[1] >= 30, read


@MODULE_LOOP
async def test_answers_stream_as_the_model_produces_them(local_hub: Hub) -> None:
    client = await local_hub.client("charles-darwin", streaming=True)
    control = await local_hub.client("charles-darwin")
    chunks: list[str] = []
    progress: list[dict[str, object]] = []  # what the hub said the model did, before words
    final = None
    async with asyncio.timeout(300):
        async for event in client.send_message(user_message("Tell me about your voyage.")):
            if event.HasField("artifact_update"):
                chunks += [p.text for p in event.artifact_update.artifact.parts if p.text]
                if len(chunks) == 1:
                    # The model runs in a worker thread: the hub serves others meanwhile.
                    running = await get_task(control, event.artifact_update.task_id)
                    assert running.status.state == TaskState.TASK_STATE_WORKING
                    assert (await local_hub.card("socrates")).name == "Socrates"
            elif event.HasField("status_update"):
                final = event.status_update.status.state
                parts = event.status_update.status.message.parts
                data = [MessageToDict(p.data) for p in parts if p.HasField("data")]
                if not chunks:
                    progress += [d for d in data if d.get("kind") == "progress"]
    assert final == TaskState.TASK_STATE_COMPLETED
    assert progress, "no progress before the first words"
    assert progress[-1]["phase"] == "reading"
    assert isinstance(progress[-1]["tokens"], float | int)
    assert progress[-1]["tokens"] > 0
    assert len(chunks) >= 3, chunks
    assert_reads_as_the_persona("".join(chunks), "Charles Darwin", CAP)


@MODULE_LOOP
async def test_two_concurrent_requests_both_complete(local_hub: Hub) -> None:
    first = await local_hub.client("marie-curie")
    second = await local_hub.client("socrates")
    async with asyncio.timeout(300):
        tasks = await asyncio.gather(
            send(first, "What is radioactivity?"), send(second, "What is virtue?")
        )
    for task, name in zip(tasks, ("Marie Curie", "Socrates"), strict=True):
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert_reads_as_the_persona(answer_text(task), name, CAP)


@MODULE_LOOP
async def test_cancel_stops_the_generation(local_hub: Hub) -> None:
    llm = backend(local_hub)
    streaming = await local_hub.client("ada-lovelace", streaming=True)
    control = await local_hub.client("ada-lovelace")
    task_id = None
    async with asyncio.timeout(300):
        async for event in streaming.send_message(user_message("Explain your work at length.")):
            if event.HasField("artifact_update") and task_id is None:
                task_id = event.artifact_update.task_id
                canceled = await control.cancel_task(CancelTaskRequest(id=task_id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                stopped_at = llm.tokens_generated
    assert task_id is not None
    assert (await get_task(control, task_id)).status.state == TaskState.TASK_STATE_CANCELED
    # The model is free again: the next message is answered. It waited its turn behind the
    # canceled generation (one at a time, in order), so every token since the cancel but
    # its own answer's is one the canceled generation made after it: at most the one or
    # two under way.
    task = await send(control, "Are you still there?")
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert llm.tokens_generated - completion_tokens(task) <= stopped_at + 2


async def test_readyz_waits_for_the_model_and_a_probe_loads_it(
    hub_factory: HubFactory, local_model_dir: Path
) -> None:
    async with hub_factory(
        llm_backend="local",
        llm_base_url=None,
        llm_api_key=None,
        mcp_config=None,
        local_model_dir=local_model_dir,
        local_threads=MODEL_THREADS,
        local_preload=False,
    ) as hub:
        first = await hub.http.get("/readyz")
        assert first.status_code == 503
        assert first.json()["notReady"] == ["llm"]
        assert first.json()["llm"]["loaded"] is False
        # That probe started loading the model; a later one finds it ready.
        async with asyncio.timeout(120):
            for _ in range(1_000):
                answer = await hub.http.get("/readyz")
                if answer.status_code == 200:
                    break
                await asyncio.sleep(0.2)
        assert answer.json()["llm"] == {"backend": "local", "model": LOCAL_MODEL_NAME}
        assert answer.json()["notReady"] == []


@MODULE_LOOP
async def test_a_document_reaches_the_embedded_model_within_its_budget(local_hub: Hub) -> None:
    """A document read into the turn is in the model's prompt: a short one adds about its
    tokens; a long one is cut to the budget (a quarter of what the prompt may take, in
    tokens of 4 characters: here (2,048 - 64) / 4 = 496, some 2,000 characters), which the
    newest turn of the transcript carries whole (a past turn would be cut to 1,200
    characters), and the model answers within its context. The text is heavy in digits,
    the worst case: about 2 characters a token on this model's tokenizer."""
    client = await local_hub.client("keeper")
    log = " ".join(f"Log {n}: the lamp was lit at dusk and the sea was calm." for n in range(8))
    long = " ".join(
        f"Entry {n}: a gale from the north-west, the glass falling." for n in range(800)
    )

    async def asked(document: str) -> Task:
        parts = [Part(text="What do you make of this?")]
        if document:
            parts.append(Part(raw=document.encode(), media_type="text/plain", filename="log.txt"))
        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=parts)
        (response,) = [r async for r in client.send_message(SendMessageRequest(message=message))]
        task = response.task
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task.status
        return task

    plain, short, cut = [await asked(document) for document in ("", log, long)]
    read = [int(cost_of(task)["usage"]["promptTokens"]) for task in (plain, short, cut)]
    assert 60 <= read[1] - read[0] <= len(log) // 2, read  # the log's ~110 tokens, and more
    assert read[2] - read[0] >= 800, read  # some 1,000 tokens: 2,000 characters, not 1,200
    assert read[2] <= (2048 - CAP) * 3 // 4, read  # room to spare in the context
