"""The matrix's OpenAI-compatible cells: the official ``openai`` client against ``/v1``
through the deployment's front (nginx on replicas): an answer, a stream with its usage, a
stream the client leaves (the model's call is closed), the models listed from the other
replica, refusals and a failing model in OpenAI's error shapes. The client's requests
keep no conversation: no task id to cancel or follow elsewhere."""

from __future__ import annotations

import asyncio

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from tests.deployment.matrix import Cell
from tests.deployment.matrix_a2a import SPEAKERS
from tests.deployment.matrix_hubs import FULL_KEY, LIMITED_KEY, Deployment
from tests.fakes.fake_llm import FakeLLM

__all__ = ["run_openai_cell"]

WAIT = 60


_OPENED: list[openai.AsyncOpenAI] = []
"""The clients a cell made, closed when it ends: one left to the garbage collector closes
its connections on a loop that is gone (an unraisable warning, an error in the suite)."""


def _client(base: str, key: str = FULL_KEY) -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=WAIT)
    _OPENED.append(client)
    return client


async def _send(deployment: Deployment, cell: Cell) -> None:
    client = _client(deployment.bases[0])
    answer = await client.chat.completions.create(
        model=cell.persona_id, messages=[{"role": "user", "content": "Hello, matrix"}]
    )
    text = answer.choices[0].message.content or ""
    for who in SPEAKERS[cell.target]:
        assert f"Answer from {who}." in text, text
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None
    assert answer.usage.total_tokens > 0


async def _stream(deployment: Deployment, cell: Cell) -> None:
    stream = await _client(deployment.bases[0]).chat.completions.create(
        model=cell.persona_id,
        messages=[{"role": "user", "content": "Hello, matrix [brief]"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop", finishes
    assert [f for f in finishes if f] == ["stop"], finishes
    texts = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "-w7" in texts, texts
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


async def _cancel(deployment: Deployment, cell: Cell, llm: FakeLLM) -> None:
    stream = await _client(deployment.bases[0]).chat.completions.create(
        model=cell.persona_id,
        messages=[{"role": "user", "content": "Hello, matrix [slow]"}],
        stream=True,
    )
    async for _chunk in stream:
        break  # the head: the task runs (a panel's text comes whole, at its end)
    await asyncio.to_thread(llm.wait_chunks, 1)  # the model is writing
    await stream.close()
    await asyncio.to_thread(llm.wait_disconnect)  # the model's call was closed


async def _listed(deployment: Deployment, cell: Cell) -> None:
    models = await _client(deployment.there()).models.list()
    assert cell.persona_id in [model.id for model in models.data]
    limited = await _client(deployment.there(), LIMITED_KEY).models.list()
    assert cell.persona_id not in [model.id for model in limited.data]


async def _refused(deployment: Deployment, cell: Cell) -> None:
    hello: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello, matrix"}]
    limited = _client(deployment.bases[0], LIMITED_KEY)
    with pytest.raises(openai.PermissionDeniedError) as forbidden:
        await limited.chat.completions.create(model=cell.persona_id, messages=hello)
    assert forbidden.value.message
    nobody = _client(deployment.bases[0], "not-a-key")
    with pytest.raises(openai.AuthenticationError) as unknown:
        await nobody.chat.completions.create(model=cell.persona_id, messages=hello)
    assert unknown.value.message


async def _failing(deployment: Deployment, cell: Cell) -> None:
    with pytest.raises(openai.APIStatusError) as failed:
        await _client(deployment.bases[0]).chat.completions.create(
            model=cell.persona_id, messages=[{"role": "user", "content": "Hello, matrix [fail]"}]
        )
    assert failed.value.status_code == 502, failed.value
    assert "500" in failed.value.message, failed.value.message


async def run_openai_cell(deployment: Deployment, cell: Cell, llm: FakeLLM) -> None:
    """Run one OpenAI-compatible cell, bounded; its clients closed after it."""
    try:
        await _run(deployment, cell, llm)
    finally:
        while _OPENED:
            await _OPENED.pop().close()


async def _run(deployment: Deployment, cell: Cell, llm: FakeLLM) -> None:
    async with asyncio.timeout(WAIT):
        if cell.operation == "send":
            await _send(deployment, cell)
        elif cell.operation == "stream":
            await _stream(deployment, cell)
        elif cell.operation == "cancel-same":
            await _cancel(deployment, cell, llm)
        elif cell.operation == "list":
            await _listed(deployment, cell)
        elif cell.operation == "refused":
            await _refused(deployment, cell)
        else:
            await _failing(deployment, cell)
