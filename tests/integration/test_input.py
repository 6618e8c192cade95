"""What a message may carry: text, data, text files; other media refused; size bounded."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf.struct_pb2 import Value

from tests.fakes.fake_llm import FakeLLM
from tests.integration.a2a_helpers import send
from tests.integration.conftest import Hub, HubFactory


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (``hub_factory`` starts them otherwise): none of
    its tests has a tool called, and each stdio server is a process of about 1 s of CPU."""
    return None


def user_message(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}


def rpc_body(parts: list[dict[str, Any]]) -> dict[str, Any]:
    message = user_message(parts)
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_data_and_text_file_parts_reach_the_model(hub: Hub, llm: FakeLLM) -> None:
    value = Value()
    value.struct_value.update({"question": "mass-energy", "units": ["kg", "J"]})
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        parts=[
            Part(text="Explain this:"),
            Part(data=value),
            Part(raw=b"E = m c^2", media_type="text/plain", filename="note.txt"),
        ],
    )
    client = await hub.client("albert-einstein")
    responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
    assert responses[0].task.status.state == TaskState.TASK_STATE_COMPLETED
    content = llm.requests[-1]["messages"][-1]["content"]
    assert content.startswith("Explain this:")
    embedded = content.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(embedded) == {"question": "mass-energy", "units": ["kg", "J"]}
    assert "[note.txt]\nE = m c^2" in content


async def test_unsupported_media_is_refused_with_the_content_type_error(hub: Hub) -> None:
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    part = {"raw": base64.b64encode(svg).decode(), "mediaType": "image/svg+xml"}
    reply = await hub.http.post(
        "/a2a/socrates/", json=rpc_body([part]), headers={"A2A-Version": "1.0"}
    )
    assert reply.json()["error"]["code"] == -32005
    assert "image/svg+xml" in reply.json()["error"]["message"]


async def test_oversized_messages_get_a_clear_error(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(max_message_bytes=4096) as hub:
        big: list[dict[str, Any]] = [{"text": "x" * 5000}]
        headers = {"A2A-Version": "1.0"}
        rpc = await hub.http.post("/a2a/socrates/", json=rpc_body(big), headers=headers)
        assert rpc.status_code == 200
        assert rpc.json()["error"]["code"] == -32600
        assert "too large" in rpc.json()["error"]["message"]

        rest = await hub.http.post(
            "/a2a/socrates/message:send",
            json={"message": user_message(big)},
            headers=headers,
        )
        assert rest.status_code == 413
        assert "too large" in rest.json()["error"]["message"]
        assert llm.requests == []
        # A message under the limit still goes through.
        task = await send(await hub.client("socrates"), "short")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
