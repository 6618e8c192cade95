"""Sending messages: blocking and streaming, on both bindings and both protocol versions."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.a2a_helpers import answer_text, send, status_text, user_message
from tests.integration.conftest import TRANSPORTS, Hub

pytestmark = pytest.mark.parametrize("transport", TRANSPORTS)


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


async def test_blocking_send_returns_the_completed_task_with_the_answer(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    words = ["I am Socrates, ", "and I know ", "that I know nothing."]
    llm.script(Reply("".join(words), chunks=words, token_delay=0.05))
    client = await hub.client("socrates", transport)
    task = await send(client, "Who are you?")

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer_text(task) == "I am Socrates, and I know that I know nothing."
    # Nobody watched it grow: the answer is one artifact of one part, not the chunks.
    assert [[p.text for p in a.parts] for a in task.artifacts] == [["".join(words)]]
    assert "I know that I know nothing" in status_text(task)
    # The persona's system prompt went to the model, then the user's message.
    request = llm.requests[-1]
    assert request["messages"][0]["role"] == "system"
    assert "Socrates" in request["messages"][0]["content"]
    assert request["messages"][-1] == {"role": "user", "content": "Who are you?"}
    # The final message carries usage (cost-v1).
    data = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
    assert len(data) == 1
    assert data[0]["kind"] == "cost-v1"
    assert data[0]["usage"]["totalTokens"] > 0


async def test_streaming_send_delivers_chunks_as_tokens_are_produced(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    words = ["Imagination ", "is ", "more ", "important ", "than ", "knowledge."]
    # The model writes its first word, then waits until the client has it.
    llm.script(Reply("".join(words), chunks=words, token_delay=0.15, hold_after=1))
    client = await hub.client("albert-einstein", transport, streaming=True)

    events = []
    chunks_sent_at_first_artifact = None
    async with asyncio.timeout(60):
        async for event in client.send_message(user_message("Say something wise")):
            if event.HasField("artifact_update") and chunks_sent_at_first_artifact is None:
                chunks_sent_at_first_artifact = llm.chunks_sent
                llm.release()
            events.append(event)

    artifact_events = [e.artifact_update for e in events if e.HasField("artifact_update")]
    # Chunks of whole tokens (one each, unless the hub was late to read them), all of one
    # artifact, appended, the last marked last_chunk.
    texts = [p.text for e in artifact_events for p in e.artifact.parts if p.text]
    assert "".join(texts) == "".join(words)
    assert texts[0] == words[0]
    assert all(t.endswith((" ", ".")) for t in texts)
    assert len({e.artifact.artifact_id for e in artifact_events}) == 1
    assert not artifact_events[0].append
    assert all(e.append for e in artifact_events[1:])
    assert artifact_events[-1].last_chunk
    # The first chunk reached the client while the model was still producing: the model
    # holds after its first chunk until released (0 when the client heard it before the fake
    # model's own count of what it sent moved on, on a busy machine).
    assert chunks_sent_at_first_artifact is not None
    assert chunks_sent_at_first_artifact <= 1
    # working first, completed last.
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED


async def test_messages_of_one_context_continue_the_conversation(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    client = await hub.client("ada-lovelace", transport)
    context_id = str(uuid.uuid4())
    llm.script(Reply("Call me Ada."), Reply("You asked what to call me."))
    first = await send(client, "What should I call you?", context_id)
    second = await send(client, "What did I just ask?", context_id)

    assert first.context_id == second.context_id == context_id
    assert first.id != second.id
    assert answer_text(second) == "You asked what to call me."
    conversation = [m for m in llm.requests[-1]["messages"] if m["role"] != "system"]
    assert conversation == [
        {"role": "user", "content": "What should I call you?"},
        {"role": "assistant", "content": "Call me Ada."},
        {"role": "user", "content": "What did I just ask?"},
    ]


async def test_concurrent_messages_of_one_context_are_serialized(
    hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    client = await hub.client("marie-curie", transport)
    context_id = str(uuid.uuid4())
    llm.script(*(Reply(f"answer {i}", token_delay=0.02) for i in range(4)))
    tasks = await asyncio.gather(*(send(client, f"question {i}", context_id) for i in range(4)))
    assert all(t.status.state == TaskState.TASK_STATE_COMPLETED for t in tasks)
    # Each call saw the whole history of the calls before it: never interleaved.
    sizes = sorted(len(r["messages"]) for r in llm.requests[-4:])
    assert sizes == [2, 4, 6, 8]
    for request in llm.requests[-4:]:
        roles = [m["role"] for m in request["messages"][1:]]
        assert roles == ["user", "assistant"] * ((len(roles) - 1) // 2) + ["user"]
