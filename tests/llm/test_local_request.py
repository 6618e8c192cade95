"""What llama.cpp's server receives from the local backend, through the openai path.

The server is the fake OpenAI-compatible one, with llama.cpp's tokenizer and chat-template
routes (``tests/fakes/fake_llm.py``): no vision GGUF ships on the package index, so an
image's way to a model with a projector is proven on the request the server receives.
The real model's tests are in ``test_local_backend.py`` and ``tests/integration``.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from persona_agent.llm.base import ChatRequest, Progress, StreamEnd, StreamItem, TextDelta
from persona_agent.llm.local.backend import PASS_THROUGH_TEMPLATE, LocalBackend
from persona_agent.llm.local.server import EmbeddedServer
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def model_file(tmp_path: Path, *, template: bool) -> Path:
    """A file that passes for a GGUF model (its header, with no metadata; a chat template's
    metadata key after it)."""
    path = tmp_path / ("chat.gguf" if template else "base.gguf")
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 0)
    path.write_bytes(header + (b"tokenizer.chat_template" if template else b""))
    return path


class FakeStart:
    """Stands in for :meth:`EmbeddedServer.start`: the fake server, and what it was asked."""

    def __init__(self, fake: FakeLLM) -> None:
        self.fake = fake
        self.options: dict[str, Any] = {}

    def __call__(self, model: Path, **options: Any) -> EmbeddedServer:
        self.options = {"model": model, **options}
        address = self.fake.base_url.removesuffix("/v1")
        return EmbeddedServer(None, address, slots=options["slots"])


async def answer(llm: LocalBackend, request: ChatRequest) -> tuple[list[StreamItem], str]:
    try:
        items = [item async for item in llm.stream(request)]
    finally:
        await llm.aclose()
    return items, "".join(item.text for item in items if isinstance(item, TextDelta))


async def test_an_image_reaches_a_model_with_a_projector(fake: FakeLLM, tmp_path: Path) -> None:
    fake.script(Reply("A small red square."))
    start = FakeStart(fake)
    llm = LocalBackend(
        model_dir=tmp_path,
        model=str(model_file(tmp_path, template=True)),
        mmproj=tmp_path / "mmproj.gguf",
        seed=7,
        cache_type_k="f16",
        cache_type_v="q8_0",
        start_server=start,
    )
    assert llm.supports_images  # the hub shows images to personas it answers for
    said = {"role": "user", "content": [{"type": "text", "text": "What is this?"}, IMAGE]}
    request = ChatRequest(messages=[{"role": "system", "content": "You are Tess."}, said])
    items, text = await answer(llm, request)
    assert start.options["mmproj"] == tmp_path / "mmproj.gguf"
    assert (start.options["cache_type_k"], start.options["cache_type_v"]) == ("f16", "q8_0")
    assert start.options["chat_template"] is None  # the file's own template
    (body,) = fake.requests
    assert body["messages"] == [{"role": "system", "content": "You are Tess."}, said]
    assert body["stream"] is True
    assert (body["top_k"], body["repeat_penalty"], body["cache_prompt"]) == (40, 1.1, True)
    assert body["seed"] == 7
    assert text == "A small red square."
    # The prompt counted before it is sent: "<system>You are Tess.", "<user>What is this?"
    # and "<assistant>" as the fake's template writes them: 7 words, a token a word, and BOS.
    assert Progress("reading", 8) in items
    end = items[-1]
    assert isinstance(end, StreamEnd)
    assert (end.usage.prompt_tokens, end.usage.completion_tokens) == (8, 4)


async def test_a_base_model_reads_its_transcript_as_one_message(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.script(Reply("I test things.\nUser: And you?"))
    start = FakeStart(fake)
    llm = LocalBackend(
        model_dir=tmp_path, model=str(model_file(tmp_path, template=False)), start_server=start
    )
    assert not llm.supports_images
    request = ChatRequest(
        messages=[
            {"role": "system", "content": "You are Tess, a tester."},
            {"role": "user", "content": "What do you do?"},
        ],
        max_tokens=32,
    )
    _, text = await answer(llm, request)
    assert start.options["chat_template"] == PASS_THROUGH_TEMPLATE
    # The defaults: keys in q8_0 (half the memory of f16), values in f16.
    assert (start.options["cache_type_k"], start.options["cache_type_v"]) == ("q8_0", "f16")
    (body,) = fake.requests
    ((message),) = body["messages"]
    assert message["role"] == "user"
    assert "You are Tess, a tester." in message["content"]
    assert "User: What do you do?" in message["content"]
    assert message["content"].endswith(":")  # the speaker's name, for the model to go on
    assert body["max_tokens"] == 32
    assert "seed" not in body  # no seed given: the server draws one
    assert text.strip() == "I test things."  # the answer filter ends the turn at "User:"


TOOL = {
    "type": "function",
    "function": {
        "name": "local__echo",
        "description": "Echo a text.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
}


async def test_a_chat_model_is_offered_the_tools_one_call_at_a_time(
    fake: FakeLLM, tmp_path: Path
) -> None:
    fake.script(ToolCalls([("local__echo", {"text": "hi"}), ("local__echo", {"text": "again"})]))
    llm = LocalBackend(
        model_dir=tmp_path,
        model=str(model_file(tmp_path, template=True)),
        start_server=FakeStart(fake),
    )
    assert llm.supports_tools  # seen in the file, before it is loaded
    said = {"role": "user", "content": "Say hi."}
    request = ChatRequest(messages=[said], tools=[TOOL], tool_choice="auto")
    items, text = await answer(llm, request)
    (body,) = fake.requests
    assert (body["tools"], body["tool_choice"]) == ([TOOL], "auto")
    assert body["parallel_tool_calls"] is False
    end = items[-1]
    assert isinstance(end, StreamEnd)
    # The first call whole; where a second begins, the answer ends (one call at a time).
    assert [(c.name, c.arguments) for c in end.tool_calls] == [("local__echo", '{"text": "hi"}')]
    assert end.finish_reason == "tool_calls"
    assert text == ""  # a call is an answer: not sampled again, no fallback line


async def test_a_base_model_is_offered_no_tools(fake: FakeLLM, tmp_path: Path) -> None:
    fake.script(Reply("I test things."))
    llm = LocalBackend(
        model_dir=tmp_path,
        model=str(model_file(tmp_path, template=False)),
        start_server=FakeStart(fake),
    )
    assert not llm.supports_tools
    request = ChatRequest(
        messages=[{"role": "user", "content": "What do you do?"}], tools=[TOOL], tool_choice="auto"
    )
    _, text = await answer(llm, request)
    (body,) = fake.requests
    assert "tools" not in body
    assert "tool_choice" not in body
    assert "parallel_tool_calls" not in body
    assert text.strip() == "I test things."
