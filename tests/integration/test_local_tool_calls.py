"""A tool call of the embedded model, through the whole hub: a chat GGUF on llama.cpp's
server calls a tool of a real MCP server (stdio), the engine runs it, and the result goes
into the model's next call (real model, real MCP server, real a2a-sdk client).

The chat GGUF is the bundled base model with a tool-capable template added
(tests/llm/chat_gguf.py): the template shows one call made, which the model copies, and
llama.cpp's grammar holds the rest of the call to the tool's schema once it begins.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import StreamResponse, TaskState
from google.protobuf.json_format import MessageToDict

from persona_agent.llm.local.weights import ensure_model_file
from tests.conftest import MODEL_THREADS
from tests.integration.a2a_helpers import user_message
from tests.integration.conftest import HubFactory
from tests.integration.persona_yaml import persona, write
from tests.llm.chat_gguf import with_chat_template

pytestmark = pytest.mark.local_model

ECHOER = persona(
    "Eli the Echoer",
    description="Eli repeats words back with the echo tool.",
    model={"temperature": 0, "max_tokens": 48},
    tools={"allow": ["local__echo"]},
)


async def test_the_embedded_chat_model_calls_an_mcp_tool_and_reads_its_result(
    hub_factory: HubFactory, personas_dir: Path, local_model_dir: Path, tmp_path: Path
) -> None:
    chat_model = with_chat_template(ensure_model_file(local_model_dir), tmp_path / "chat.gguf")
    write(personas_dir, "echoer", ECHOER)
    async with hub_factory(
        llm_backend="local",
        local_model=str(chat_model),
        local_model_dir=local_model_dir,
        local_threads=MODEL_THREADS,
        local_slots=1,
        local_warm_personas=0,
        max_tool_iterations=1,  # one call with tools, then the answer (tool_choice "none")
        tool_timeout=30,
        llm_timeout=300,
    ) as hub:
        client = await hub.client("echoer", streaming=True)
        async with asyncio.timeout(600):  # a safety bound: the real model on busy cores
            events: list[StreamResponse] = [
                event async for event in client.send_message(user_message("Echo 'ember'."))
            ]
        record = await hub.http.get(
            f"/api/v1/conversations/echoer/{events[-1].status_update.context_id}/prompt"
        )
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    data = [
        MessageToDict(part.data)
        for event in events
        if event.HasField("status_update")
        for part in event.status_update.status.message.parts
        if part.HasField("data")
    ]
    steps = [d for d in data if d.get("kind") in ("tool-call", "tool-result")]
    assert [d["kind"] for d in steps] == ["tool-call", "tool-result"], steps
    call, result = steps
    assert call["tool"] == "local__echo"  # the model's call, parsed by the server
    text = call["arguments"]["text"]
    assert isinstance(text, str)
    assert result["isError"] is False, result
    assert result["result"] == text  # the real MCP server echoed what the model asked
    # Two calls to the model, the second reading more: the call and its result after the
    # prompt (docs/prompt.md); the prompt record counts both.
    reads = [
        int(d["tokens"]) for d in data if d.get("kind") == "progress" and d["phase"] == "reading"
    ]
    assert len(reads) == 2, data
    assert reads[1] > reads[0]
    assert record.status_code == 200, record.text
    assert record.json()["modelCalls"] == 2
