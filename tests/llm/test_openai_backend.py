"""OpenAIBackend against a real OpenAI-compatible HTTP server (the scripted fake)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest

from persona_agent.errors import ConfigError, LLMError
from persona_agent.llm import ChatRequest, OpenAIBackend, StreamEnd, TextDelta, ToolCall, Usage
from persona_agent.llm.base import TEXT_INTERVAL
from tests.fakes.fake_llm import Fail, FakeLLM, Hang, Reply, ToolCalls

HELLO = ChatRequest(messages=[{"role": "user", "content": "Hello there"}])
WAIT = 60.0
"""Seconds a test waits at most for what must happen: a safety bound, not a timing."""
SECRET = "sk-test-do-not-leak"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
        },
    }
]


@pytest.fixture
async def backend(fake: FakeLLM) -> AsyncIterator[OpenAIBackend]:
    llm = OpenAIBackend(
        base_url=fake.base_url, api_key=SECRET, model="fake-model", timeout=WAIT, max_retries=0
    )
    yield llm
    await llm.aclose()


async def collect(llm: OpenAIBackend, request: ChatRequest = HELLO) -> list[TextDelta | StreamEnd]:
    received: list[TextDelta | StreamEnd] = []
    await collect_into(received, llm, request)
    return received


async def collect_into(
    received: list[TextDelta | StreamEnd], llm: OpenAIBackend, request: ChatRequest = HELLO
) -> None:
    """Append every item of one bounded stream, so that a test sees what came before an error."""
    async with asyncio.timeout(WAIT), aclosing(llm.stream(request)) as items:
        async for item in items:
            received.append(item)


def split(items: list[TextDelta | StreamEnd]) -> tuple[list[str], StreamEnd]:
    *deltas, end = items
    assert isinstance(end, StreamEnd)
    assert all(isinstance(d, TextDelta) for d in deltas)
    return [d.text for d in deltas if isinstance(d, TextDelta)], end


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_streams_text_deltas_then_the_end_with_usage(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("The radium glows faintly tonight.", usage=(12, 5), hold_after=1))
    async with asyncio.timeout(WAIT), aclosing(backend.stream(HELLO)) as items:
        first = await anext(items)
        assert first == TextDelta("The")  # given out as it came, the model holding the rest
        fake.release()
        rest = [item async for item in items]
    deltas, end = split([first, *rest])
    assert "".join(deltas) == "The radium glows faintly tonight."
    assert end == StreamEnd(tool_calls=[], usage=Usage(12, 5), finish_reason="stop")


async def test_a_fast_stream_is_given_out_in_few_pieces_the_first_at_once(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    text = " ".join(f"word{i}" for i in range(300))
    fake.script(Reply(text, token_delay=0.001))  # ~0.3 s of tokens, a thousand a second
    loop = asyncio.get_running_loop()
    started = loop.time()
    deltas, _ = split(await collect(backend))
    took = loop.time() - started
    assert "".join(deltas) == text  # nothing lost, nothing reordered
    assert len(deltas[0].split()) <= 2  # the first text is not held back
    # About one piece per TEXT_INTERVAL, not one per token: counted against the time the
    # stream really took (a busy machine stretches it), so this bounds pieces, not speed.
    assert len(deltas) <= took / TEXT_INTERVAL + 2, (len(deltas), took)


async def test_sends_the_model_and_only_the_options_that_are_set(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    await collect(backend)
    await collect(
        backend,
        ChatRequest(
            messages=HELLO.messages,
            model="other-model",
            temperature=0.2,
            max_tokens=50,
            tools=TOOLS,
            tool_choice="auto",
        ),
    )
    plain, full = fake.requests
    assert plain["model"] == "fake-model"
    assert plain["stream"] is True
    assert plain["stream_options"] == {"include_usage": True}
    assert plain["messages"] == HELLO.messages
    assert not {"temperature", "max_tokens", "tools", "tool_choice"} & plain.keys()
    assert full["model"] == "other-model"
    assert (full["temperature"], full["max_tokens"]) == (0.2, 50)
    assert (full["tools"], full["tool_choice"]) == (TOOLS, "auto")


async def test_messages_reach_the_server_as_given(fake: FakeLLM, backend: OpenAIBackend) -> None:
    """Every message arrives exactly, as JSON it is told is JSON, with the hub's user agent."""
    prompt = 'You are Zoë. Say "ja" \\ or «non»;\nnever \u2028 or \t.' * 50
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": prompt},
        {"role": "user", "content": "Grüß dich 👋"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
        {"role": "system", "content": prompt, "name": "extra"},
    ]
    for _ in range(2):  # the second from the kept system message
        await collect(backend, ChatRequest(messages=messages))
    first, second = fake.requests
    assert first["messages"] == messages
    assert second == first
    seen = fake.seen[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert seen.headers["user-agent"].startswith("persona-agent/")


async def test_default_reply_and_usage_from_the_server(backend: OpenAIBackend) -> None:
    deltas, end = split(await collect(backend))
    assert "".join(deltas) == "Hello from the fake LLM. You said: Hello there"
    assert end.usage == Usage(prompt_tokens=2, completion_tokens=9)


async def test_one_tool_call_is_reassembled(fake: FakeLLM, backend: OpenAIBackend) -> None:
    arguments = {"a": 2, "b": 40, "note": "a long enough text to need several fragments"}
    fake.script(ToolCalls([("add", arguments)]))
    deltas, end = split(await collect(backend))
    assert deltas == []
    assert end.finish_reason == "tool_calls"
    [call] = end.tool_calls
    assert call.name == "add"
    assert call.id
    assert json.loads(call.arguments) == arguments
    assert end.usage.completion_tokens > 0


async def test_two_tool_calls_keep_their_order_and_ids(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(ToolCalls([("add", {"a": 1, "b": 2}), ("echo", {"text": "over http"})]))
    _, end = split(await collect(backend))
    assert [(c.name, json.loads(c.arguments)) for c in end.tool_calls] == [
        ("add", {"a": 1, "b": 2}),
        ("echo", {"text": "over http"}),
    ]
    assert len({c.id for c in end.tool_calls}) == 2


async def test_invalid_json_arguments_are_passed_through_raw(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(ToolCalls([("add", "{not json")]))
    _, end = split(await collect(backend))
    assert end.tool_calls == [ToolCall(id=end.tool_calls[0].id, name="add", arguments="{not json")]


async def test_tool_call_ids_and_names_repeated_in_every_fragment_are_kept_once(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    """Some servers repeat ``id`` and ``name`` in each fragment: the call is still one."""
    fake.script(ToolCalls([("add", {"a": 1, "b": 2, "c": 3})], repeat_names=True))
    _, end = split(await collect(backend))
    [call] = end.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("add", {"a": 1, "b": 2, "c": 3})


async def test_a_500_is_an_llm_error_naming_the_status(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Fail(500, "model exploded"))
    with pytest.raises(LLMError) as caught:
        await collect(backend)
    assert caught.value.message == "The language model server answered 500"  # for clients
    assert caught.value.detail == "model exploded"  # for the log
    assert len(fake.requests) == 1  # max_retries=0


async def test_a_500_is_retried_and_then_succeeds(fake: FakeLLM) -> None:
    fake.script(Fail(500, headers={"Retry-After-Ms": "10"}), Reply("Recovered."))
    llm = OpenAIBackend(base_url=fake.base_url, api_key=None, model="m", max_retries=1)
    try:
        deltas, end = split(await collect(llm))
    finally:
        await llm.aclose()
    assert "".join(deltas) == "Recovered."
    assert end.finish_reason == "stop"
    assert len(fake.requests) == 2


async def test_a_429_with_retry_after_0_is_retried(fake: FakeLLM) -> None:
    fake.script(Fail(429, "slow down", headers={"Retry-After": "0"}), Reply("Now then."))
    llm = OpenAIBackend(base_url=fake.base_url, api_key=None, model="m", max_retries=2)
    try:
        deltas, _ = split(await collect(llm))
    finally:
        await llm.aclose()
    assert "".join(deltas) == "Now then."
    assert len(fake.requests) == 2


async def test_retries_give_up_with_the_last_status(fake: FakeLLM) -> None:
    fake.script(*[Fail(503, "busy", headers={"Retry-After-Ms": "1"})] * 3)
    llm = OpenAIBackend(base_url=fake.base_url, api_key=None, model="m", max_retries=2)
    try:
        with pytest.raises(LLMError, match="answered 503: busy"):
            await collect(llm)
    finally:
        await llm.aclose()
    assert len(fake.requests) == 3


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (Fail(503, "down for good", {"X-Should-Retry": "false"}), r"answered 503: down for good"),
        (Fail(400, "bad model"), r"rejected the request \(400\): bad model"),
    ],
    ids=["server-says-no", "client-error"],
)
async def test_an_answer_not_worth_retrying_is_not_retried(
    fake: FakeLLM, failure: Fail, message: str
) -> None:
    fake.script(failure, Reply("No."))
    llm = OpenAIBackend(base_url=fake.base_url, api_key=None, model="m", max_retries=2)
    try:
        with pytest.raises(LLMError, match=message):
            await collect(llm)
    finally:
        await llm.aclose()
    assert len(fake.requests) == 1


async def test_a_rejected_request_never_shows_the_api_key(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Fail(401, f"Incorrect API key provided: {SECRET}"))
    with pytest.raises(LLMError) as caught:
        await collect(backend)
    assert caught.value.message == "The language model rejected the request (401)"
    assert str(caught.value).startswith(
        "The language model rejected the request (401): Incorrect API key"
    )
    assert SECRET not in str(caught.value)


def test_credentials_in_the_base_url_are_refused_without_echoing_them() -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAIBackend(base_url=f"http://user:{SECRET}@127.0.0.1:1/v1", api_key=None, model="m")
    assert caught.value.message == (
        "The LLM base URL must not contain credentials (http://127.0.0.1:1/v1): "
        "set PERSONA_AGENT_LLM_API_KEY instead"
    )


async def test_an_unreachable_server_is_named_without_credentials() -> None:
    port = closed_port()
    llm = OpenAIBackend(
        base_url=f"http://127.0.0.1:{port}/v1/",
        api_key=SECRET,
        model="m",
        max_retries=0,
    )
    try:
        with pytest.raises(LLMError) as caught:
            await collect(llm)
    finally:
        await llm.aclose()
    assert caught.value.message == (
        f"The language model server could not be reached (http://127.0.0.1:{port}/v1)"
    )


async def test_a_server_that_never_answers_times_out(fake: FakeLLM) -> None:
    fake.script(Hang())
    llm = OpenAIBackend(base_url=fake.base_url, api_key=None, model="m", timeout=0.3, max_retries=0)
    try:
        with pytest.raises(
            LLMError, match=r"^The language model did not answer within 0\.3s \(retries included\)$"
        ):
            await collect(llm)
    finally:
        await llm.aclose()
    await asyncio.to_thread(fake.wait_disconnect)  # the request was abandoned


async def test_retries_fit_inside_the_one_deadline_of_a_call(fake: FakeLLM) -> None:
    """A silent server costs the timeout once, not once an attempt: the client's retries run
    inside the call's deadline, so the message tells what really happened."""
    fake.script(Hang(), Hang(), Hang())
    llm = OpenAIBackend(base_url=fake.base_url, api_key=None, model="m", timeout=0.5, max_retries=2)
    try:
        with pytest.raises(LLMError, match=r"did not answer within 0\.5s \(retries included\)"):
            await collect(llm)
    finally:
        await llm.aclose()
    assert len(fake.requests) == 1  # the deadline came before a second attempt could start


async def test_a_stream_that_stalls_midway_times_out(fake: FakeLLM) -> None:
    fake.script(Reply("one two three", chunks=["one", " two", " three"], token_delay=2))
    llm = OpenAIBackend(base_url=fake.base_url, api_key=None, model="m", timeout=0.3, max_retries=0)
    try:
        with pytest.raises(LLMError, match=r"^The language model sent nothing for 0\.3s$"):
            await collect(llm)
    finally:
        await llm.aclose()
    await asyncio.to_thread(fake.wait_disconnect)


async def test_a_broken_stream_is_an_llm_error_after_the_tokens_received(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("one two three four five", break_after=2))
    received: list[TextDelta | StreamEnd] = []
    with pytest.raises(LLMError, match=r"^The language model stream broke off: "):
        await collect_into(received, backend)
    assert "".join(d.text for d in received if isinstance(d, TextDelta)) == "one two"
    assert fake.chunks_sent == 2


async def test_closing_the_stream_early_closes_the_http_response(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    words = [f" word{i}" for i in range(20)]
    fake.script(Reply("".join(words), chunks=words, hold_after=1))  # the rest never comes
    async with asyncio.timeout(WAIT):
        items = backend.stream(HELLO)
        first = await anext(items)
        assert first == TextDelta(" word0")
        await items.aclose()
    await asyncio.to_thread(fake.wait_disconnect)  # seen by the model while it held
    await asyncio.to_thread(fake.wait_idle)
    assert fake.chunks_sent == 1
    assert fake.active == 0  # nothing is sending any more: the count cannot grow


async def test_cancelling_the_consumer_closes_the_http_response(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    words = [f" word{i}" for i in range(20)]
    fake.script(Reply("".join(words), chunks=words, hold_after=1))  # the rest never comes
    got_first = asyncio.Event()
    received: list[Any] = []

    async def consume() -> None:
        async with aclosing(backend.stream(HELLO)) as items:
            async for item in items:
                received.append(item)
                got_first.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(WAIT):
        await got_first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()  # the CancelledError was not swallowed
    await asyncio.to_thread(fake.wait_disconnect)  # seen by the model while it held
    await asyncio.to_thread(fake.wait_idle)
    assert fake.chunks_sent == 1
    assert len(received) == 1


async def test_cancelling_while_waiting_for_the_answer_abandons_the_request(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Hang())
    task = asyncio.create_task(collect(backend))
    await asyncio.to_thread(fake.wait_requests, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(fake.wait_disconnect)


async def test_the_connection_is_reused_after_a_complete_stream(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("first"), Reply("second"))
    first, _ = split(await collect(backend))
    second, _ = split(await collect(backend))
    assert (first, second) == (["first"], ["second"])
    assert fake.disconnects == 0


async def test_default_model_and_name() -> None:
    llm = OpenAIBackend(base_url=None, api_key=None, model="gpt-4o-mini")
    assert (llm.name, llm.default_model, llm.supports_tools) == ("openai", "gpt-4o-mini", True)
    await llm.aclose()


async def test_an_error_event_in_the_stream_is_an_llm_error_with_its_message(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("one two three", error_after=1, error_message="quota exceeded"))
    received: list[TextDelta | StreamEnd] = []
    with pytest.raises(LLMError, match="reported an error in its stream: quota exceeded"):
        await collect_into(received, backend)
    assert received == [TextDelta("one")]


async def test_azure_openai_deployment_path_api_version_and_key_header(fake: FakeLLM) -> None:
    """With an API version, the base URL is an Azure resource and the model its deployment."""
    endpoint = fake.base_url.removesuffix("/v1")
    llm = OpenAIBackend(
        base_url=endpoint,
        api_key=SECRET,
        model="my-deployment",
        max_retries=0,
        api_version="2024-10-21",
    )
    try:
        deltas, end = split(await collect(llm, ChatRequest(messages=HELLO.messages, max_tokens=40)))
    finally:
        await llm.aclose()
    assert "".join(deltas) == "Hello from the fake LLM. You said: Hello there"
    assert end.finish_reason == "stop"
    [seen] = fake.seen
    assert seen.path == "/openai/deployments/my-deployment/chat/completions"
    assert seen.query == "api-version=2024-10-21"
    assert seen.headers["api-key"] == SECRET
    [body] = fake.requests
    # Azure (like OpenAI itself) takes the newer name of the limit, which reasoning models need.
    assert body["max_completion_tokens"] == 40
    assert "max_tokens" not in body


def test_azure_needs_its_endpoint() -> None:
    with pytest.raises(ConfigError, match="needs the resource's endpoint"):
        OpenAIBackend(base_url=None, api_key=SECRET, model="m", api_version="2024-10-21")


WHOLE = ChatRequest(messages=[{"role": "user", "content": "Hello there"}], whole=True)


async def test_a_whole_answer_comes_as_its_first_text_then_the_rest_in_one_piece(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("The radium glows faintly tonight.", usage=(12, 5), token_delay=0.03))
    deltas, end = split(await collect(backend, WHOLE))
    assert deltas == ["The", " radium glows faintly tonight."]
    assert end == StreamEnd(tool_calls=[], usage=Usage(12, 5), finish_reason="stop")


async def test_a_whole_answer_of_one_piece_is_that_piece(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("Alone"))
    deltas, end = split(await collect(backend, WHOLE))
    assert (deltas, end.finish_reason) == (["Alone"], "stop")


async def test_a_whole_answer_reassembles_tool_calls(fake: FakeLLM, backend: OpenAIBackend) -> None:
    fake.script(ToolCalls([("add", {"a": 1}), ("add", '{"a": 2')]))
    deltas, end = split(await collect(backend, WHOLE))
    assert deltas == []
    assert [(call.name, call.arguments) for call in end.tool_calls] == [
        ("add", '{"a": 1}'),
        ("add", '{"a": 2'),
    ]
    assert end.finish_reason == "tool_calls"


async def test_a_whole_answer_broken_off_is_an_llm_error(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("one two three four five", break_after=2))
    with pytest.raises(LLMError, match=r"^The language model stream broke off: "):
        await collect(backend, WHOLE)


async def test_a_whole_answer_with_an_error_event_is_an_llm_error(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    fake.script(Reply("one two three", error_after=1, error_message="overloaded"))
    with pytest.raises(LLMError, match="error in its stream") as raised:
        await collect(backend, WHOLE)
    assert raised.value.detail == "overloaded"


async def test_cancelling_a_whole_answer_closes_the_http_response(
    fake: FakeLLM, backend: OpenAIBackend
) -> None:
    words = [f" word{i}" for i in range(20)]
    fake.script(Reply("".join(words), chunks=words, hold_after=1))  # the rest never comes
    got_first = asyncio.Event()

    async def consume() -> None:
        async with aclosing(backend.stream(WHOLE)) as items:
            async for _ in items:
                got_first.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(WAIT):
        await got_first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()
    await asyncio.to_thread(fake.wait_disconnect)  # seen by the model while it held
    await asyncio.to_thread(fake.wait_idle)
    assert fake.chunks_sent == 1
