"""Message parts: text is the conversation, data goes to the model as JSON, inline text
files are read, anything else is refused; every message is bounded in size."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conformance.conftest import (
    ALL_TRANSPORTS,
    MODULE_LOOP,
    SPEC_ERRORS,
    Wire,
    data_part,
    file_part,
    text_part,
)
from tests.conformance.grpc_wire import wire_of
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.integration.conftest import Hub, HubFactory

pytestmark = MODULE_LOOP

ONE_MIB = 1024 * 1024


def last_user_content(llm: FakeLLM) -> str:
    messages = llm.requests[-1]["messages"]
    content = [m for m in messages if m["role"] == "user"][-1]["content"]
    assert isinstance(content, str)
    return content


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_data_parts_reach_the_model_as_json(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    value = {"city": "Zürich", "days": [1, 2.5], "nested": {"ok": True, "none": None}}
    wire = wire_of(module_hub, "socrates", transport)
    task = wire.task(await wire.send_message([text_part("Plan this trip:"), data_part(value)]))
    assert wire.state(task) == "TASK_STATE_COMPLETED"
    content = last_user_content(llm)
    assert content.startswith("Plan this trip:")
    block = re.search(r"```json\n(.*?)\n```", content, re.DOTALL)
    assert block is not None, content
    assert json.loads(block.group(1)) == value


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
async def test_inline_text_files_reach_the_model(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str]
) -> None:
    text = "Line one.\nLigne deux, avec des accents: é à ü.\n"
    wire = wire_of(module_hub, "socrates", transport)
    part = file_part(text.encode(), "text/plain", "notes.txt")
    task = wire.task(await wire.send_message([text_part("Summarise my notes."), part]))
    assert wire.state(task) == "TASK_STATE_COMPLETED"
    content = last_user_content(llm)
    assert "notes.txt" in content
    assert text.strip() in content
    # The task's history gives the client its file back as sent, whatever the binding.
    assert text.encode() in _inline_files(task)
    stored = wire.task(await wire.get_task(str(task["id"])))
    assert text.encode() in _inline_files(stored)
    streamed = wire.events(await wire.send_streaming_message([text_part("Again."), part]))
    assert text.encode() in _inline_files(streamed[0])  # the task, first event of the stream


def _inline_files(value: Any) -> list[bytes]:
    """The bytes of every inline file in a task as a binding writes it (1.0: ``raw``;
    v0.3 JSON-RPC: ``file.bytes``; v0.3 HTTP+JSON: ``file.fileWithBytes``)."""
    found: list[bytes] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("raw", "bytes", "fileWithBytes") and isinstance(item, str):
                found.append(base64.b64decode(item))
            else:
                found.extend(_inline_files(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_inline_files(item))
    return found


_TEXT_TYPES = [
    ("text/markdown", b"# Title\n\n*emphasis*"),
    ("text/csv", b"a,b\n1,2\n"),
    ("application/json", b'{"k": [1, 2]}'),
    ("application/yaml", b"k: [1, 2]\n"),
    ("application/xml", b"<k><v>1</v></k>"),
]
_UNDECLARED_TYPES = [  # text/html and application/pdf are documents: tests/knowledge
    ("application/zip", b"PK\x03\x04"),
    ("text/x-python", b"print('hello')\n"),
]


@pytest.mark.parametrize(("media_type", "content"), _TEXT_TYPES)
async def test_files_of_every_text_type_are_read(
    module_hub: Hub, llm: FakeLLM, media_type: str, content: bytes
) -> None:
    wire = Wire(module_hub.http, "socrates", ("JSONRPC", "1.0"))
    response = await wire.send_message([file_part(content, media_type, "attached")])
    task = wire.task(response)
    assert wire.state(task) == "TASK_STATE_COMPLETED"
    assert content.decode() in last_user_content(llm)


@pytest.mark.parametrize(
    "part",
    [
        pytest.param({"url": "https://example.com/notes.txt", "mediaType": "text/plain"}, id="url"),
        pytest.param({"raw": "aGVsbG8="}, id="no-media-type"),
        *(pytest.param(file_part(body, media), id=media) for media, body in _UNDECLARED_TYPES),
    ],
)
async def test_an_unreadable_file_part_is_content_type_not_supported(
    module_hub: Hub, llm: FakeLLM, part: dict[str, Any]
) -> None:
    wire = Wire(module_hub.http, "socrates", ("JSONRPC", "1.0"))
    error = wire.error(await wire.send_message([text_part("Read this."), part]))
    assert error.matches("JSONRPC", SPEC_ERRORS["ContentTypeNotSupported"])
    assert llm.requests == []  # refused before any task, the model never saw it


def _big_text(size: int) -> dict[str, Any]:
    return text_part("x" * size)


@pytest.mark.parametrize("transport", ALL_TRANSPORTS)
@pytest.mark.parametrize("streaming", [False, True], ids=["send", "stream"])
async def test_a_message_over_the_default_limit_gets_a_clear_error(
    module_hub: Hub, llm: FakeLLM, transport: tuple[str, str], streaming: bool
) -> None:
    assert module_hub.settings.max_message_bytes == ONE_MIB
    wire = wire_of(module_hub, "socrates", transport)
    parts = [_big_text(ONE_MIB + 1)]
    response = await (wire.send_streaming_message(parts) if streaming else wire.send_message(parts))
    if wire.binding == "GRPC":  # grpc's own limit, set from the hub's
        error = wire.error(response)
        assert error.grpc_status == "RESOURCE_EXHAUSTED"
        assert str(ONE_MIB) in error.message
        assert llm.requests == []
        return
    if wire.binding == "JSONRPC":
        body = response.json()
        assert body["error"]["code"] == -32600
    else:
        assert response.status_code == 413  # refused on its Content-Length, before reading
    assert "too large" in response.text.lower()
    assert str(ONE_MIB) in response.text
    assert llm.requests == []


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_message_limit_is_configurable(
    hub_factory: HubFactory, llm: FakeLLM, binding: str
) -> None:
    async with hub_factory(mcp_config=None, max_message_bytes=4096) as hub:
        wire = Wire(hub.http, "socrates", (binding, "1.0"))
        refused = await wire.send_message([_big_text(5000)])
        assert "too large" in refused.text.lower()
        assert "4096" in refused.text
        llm.script(Reply("Short enough."))
        accepted = wire.task(await wire.send_message([_big_text(3000)]))
        assert wire.state(accepted) == "TASK_STATE_COMPLETED"


async def _chunks(total: int, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    yield b'{"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "'
    for _ in range(total // size + 1):
        yield b"x" * size
    yield b'"}]}}'


@pytest.mark.parametrize(
    "binding",
    [
        "JSONRPC",
        "HTTP+JSON",
    ],
)
async def test_a_chunked_message_over_the_limit_gets_a_clear_error(
    module_hub: Hub, llm: FakeLLM, binding: str
) -> None:
    # No Content-Length: the hub finds out while reading the body.
    headers = {"A2A-Version": "1.0", "content-type": "application/json"}
    path = "/a2a/socrates/" if binding == "JSONRPC" else "/a2a/socrates/message:send"
    response = await module_hub.http.post(path, content=_chunks(ONE_MIB + 1), headers=headers)
    if binding == "JSONRPC":
        assert response.json()["error"]["code"] == -32600
    else:
        assert response.status_code == 413  # as when its Content-Length says so
    assert "too large" in response.text.lower()
    assert llm.requests == []
