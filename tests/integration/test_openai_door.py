"""Personas as models (``/v1``), driven by the official ``openai`` Python client, sync (in a
thread) and async, against the hub on a real uvicorn, and by raw requests in the shapes
SillyTavern's Chat Completion source and Open WebUI send: the persona answers with its
own prompt, the client's messages as the conversation, its tools handed back as tool
calls, its stream cancelled when the client leaves; the same doors as A2A."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from tests.fakes.fake_llm import Fail, FakeLLM, Hang, Reply, ToolCalls
from tests.integration.conftest import Hub, HubFactory

ALICE_KEY = "alice-key-0123456789abcdef"
SOCRATIC_KEY = "socratic-key-0123456789abcdef"
KEYS = [
    {"name": "alice", "key": ALICE_KEY},
    {"name": "socratic", "key": SOCRATIC_KEY, "personas": ["socrates"]},
]
Messages = list[ChatCompletionMessageParam]
WEATHER_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
def mcp_config_file() -> None:
    """No MCP servers for this module's hubs (each stdio server costs about 1 s of CPU)."""
    return None


def sync_client(hub: Hub, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{hub.settings.base_url}/v1", api_key=key, max_retries=0)


_OPENED: list[openai.AsyncOpenAI] = []
"""The async clients a test made, closed after it (one left to the garbage collector closes
its connections on a loop that is gone: an unraisable warning, an error here)."""


@pytest.fixture(autouse=True)
async def _close_async_clients() -> AsyncIterator[None]:
    yield
    while _OPENED:
        await _OPENED.pop().close()


def async_client(hub: Hub, key: str = "unused") -> openai.AsyncOpenAI:
    client = openai.AsyncOpenAI(base_url=f"{hub.settings.base_url}/v1", api_key=key, max_retries=0)
    _OPENED.append(client)
    return client


def system_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system"]


async def test_the_sync_client_lists_the_personas_and_a_persona_answers_the_conversation(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(Reply("Know thyself.", usage=(40, 3)))
    async with hub_factory() as hub:
        client = sync_client(hub)
        models = await asyncio.to_thread(client.models.list)
        ids = {model.id for model in models.data}
        assert {"socrates", "marie-curie", "science-panel"} <= ids
        assert all(model.owned_by == "persona-agent" for model in models.data)
        one = await asyncio.to_thread(client.models.retrieve, "socrates")
        assert one.id == "socrates"

        conversation: Messages = [
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": "Who are you?"},
            {"role": "assistant", "content": "A gadfly."},
            {"role": "user", "content": "What should I learn first?"},
        ]

        def ask() -> Any:
            return client.chat.completions.create(
                model="socrates",
                messages=conversation,
                max_tokens=50,
                temperature=0.3,
                stop=["\nUser:"],
            )

        answer = await asyncio.to_thread(ask)
    assert answer.choices[0].message.content == "Know thyself."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "socrates"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (40, 3)
    assert answer.usage.total_tokens == 43
    # The model was shown the persona's prompt first, the caller's instructions after it,
    # then the client's conversation as it sent it (no greeting, nothing stored read).
    sent = llm.requests[-1]
    systems = system_texts(sent)
    assert "Socrates" in systems[0]
    assert systems[1] == "Answer in one sentence."
    talk = [(m["role"], m["content"]) for m in sent["messages"] if m["role"] != "system"]
    assert talk == [
        ("user", "Who are you?"),
        ("assistant", "A gadfly."),
        ("user", "What should I learn first?"),
    ]
    assert sent["temperature"] == 0.3
    assert sent["stop"] == ["\nUser:"]
    assert int(sent.get("max_tokens") or sent["max_completion_tokens"]) <= 50


async def test_the_async_client_streams_the_answer_with_its_usage(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(Reply("The only true wisdom is knowing you know nothing.", usage=(20, 10)))
    async with hub_factory() as hub:
        client = async_client(hub)
        stream = await client.chat.completions.create(
            model="socrates",
            messages=[{"role": "user", "content": "What is wisdom?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        # A second conversation is a fresh one: nothing of the first is shown.
        await client.chat.completions.create(
            model="socrates", messages=[{"role": "user", "content": "Hello again."}]
        )
        # Each request was an A2A task of the persona, counted through the door it came by.
        metrics = (await hub.http.get("/metrics")).text
        task = await hub.http.get(
            f"/a2a/socrates/tasks/{chunks[0].id.removeprefix('chatcmpl-')}",
            headers={"A2A-Version": "1.0"},
        )
    assert (
        'persona_agent_a2a_requests_total{binding="openai",method="SendStreamingMessage",'
        'outcome="ok",persona="socrates"} 2.0'
    ) in metrics
    assert task.status_code == 200, task.text
    assert task.json()["status"]["state"] == "TASK_STATE_COMPLETED"
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(texts) == "The only true wisdom is knowing you know nothing."
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 30
    assert len({chunk.id for chunk in chunks}) == 1
    second = llm.requests[-1]["messages"]
    assert [m["content"] for m in second if m["role"] != "system"] == ["Hello again."]


async def test_a_client_declared_tool_is_handed_back_and_its_result_taken(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(ToolCalls([("get_weather", {"city": "Athens"})]), Reply("Sunny in Athens."))
    asked: Messages = [{"role": "user", "content": "What is the weather in Athens?"}]
    async with hub_factory() as hub:
        client = async_client(hub)
        first = await client.chat.completions.create(
            model="socrates", messages=asked, tools=[WEATHER_TOOL]
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls
        assert calls is not None
        assert len(calls) == 1
        call = calls[0]
        assert call.type == "function"
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Athens"}
        # The tool was offered to the model as the client declared it.
        offered = {t["function"]["name"] for t in llm.requests[0]["tools"]}
        assert "get_weather" in offered

        second = await client.chat.completions.create(
            model="socrates",
            messages=[
                *asked,
                cast(ChatCompletionMessageParam, choice.message.model_dump(exclude_none=True)),
                {"role": "tool", "tool_call_id": call.id, "content": "sunny, 30 C"},
            ],
            tools=[WEATHER_TOOL],
        )
    assert second.choices[0].message.content == "Sunny in Athens."
    assert second.choices[0].finish_reason == "stop"
    shown = llm.requests[-1]["messages"]
    assert shown[-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny, 30 C"}
    assert shown[-2]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_a_client_declared_tool_streams_as_tool_call_deltas(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(ToolCalls([("get_weather", {"city": "Sparta"})]))
    async with hub_factory() as hub:
        stream = await async_client(hub).chat.completions.create(
            model="socrates",
            messages=[{"role": "user", "content": "Weather in Sparta?"}],
            tools=[WEATHER_TOOL],
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices[0].delta.tool_calls]
    assert len(deltas) == 1
    assert deltas[0][0].function is not None
    assert deltas[0][0].function.name == "get_weather"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_an_unknown_model_a_refused_key_and_bad_input_are_openai_errors(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    hello: Messages = [{"role": "user", "content": "Hello"}]
    async with hub_factory(api_keys=json.dumps(KEYS), a2a_access="authenticated") as hub:
        alice, socratic = async_client(hub, ALICE_KEY), async_client(hub, SOCRATIC_KEY)
        with pytest.raises(openai.NotFoundError) as unknown:
            await alice.chat.completions.create(model="no-such-persona", messages=hello)
        assert unknown.value.code == "model_not_found"
        assert "GET /v1/models" in unknown.value.message
        with pytest.raises(openai.AuthenticationError):
            await async_client(hub, "not-a-key").chat.completions.create(
                model="socrates", messages=hello
            )
        with pytest.raises(openai.AuthenticationError):
            await async_client(hub, "not-a-key").models.list()
        with pytest.raises(openai.PermissionDeniedError):
            await socratic.chat.completions.create(model="marie-curie", messages=hello)
        assert [m.id for m in (await socratic.models.list()).data] == ["socrates"]
        with pytest.raises(openai.BadRequestError) as several:
            await alice.chat.completions.create(model="socrates", messages=hello, n=2)
        assert several.value.param == "n"
        raw = await hub.http.post(
            "/v1/chat/completions",
            content=b"{" + b'"model": "socrates", ' * 2 + b"}",
            headers={"Authorization": f"Bearer {ALICE_KEY}"},
        )
        assert raw.status_code == 400
        assert raw.json()["error"]["type"] == "invalid_request_error"
    assert llm.requests == []


async def test_a_rate_limited_caller_gets_429_with_retry_after(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    hello: Messages = [{"role": "user", "content": "Hello"}]
    limits = {"api_keys": json.dumps(KEYS), "rate_limit": 1}
    async with hub_factory(**limits) as hub:
        client = async_client(hub, ALICE_KEY)
        await client.chat.completions.create(model="socrates", messages=hello)
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(model="socrates", messages=hello)
    assert limited.value.response.headers["Retry-After"]


async def test_a_client_that_leaves_a_stream_cancels_the_model_call(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(Reply("one two three four five six seven", hold_after=2))
    async with hub_factory() as hub:
        stream = await async_client(hub).chat.completions.create(
            model="socrates", messages=[{"role": "user", "content": "Talk."}], stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break
        await stream.close()
        await asyncio.to_thread(llm.wait_disconnect)
    assert llm.disconnects == 1


async def test_a_panel_answers_as_one_message_naming_each_member(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script_for("You are Albert Einstein.", Reply("Imagination."))
    llm.script_for("You are Marie Curie.", Reply("Nothing is to be feared."))
    llm.script_for("You are Charles Darwin.", Reply("Adapt."))
    question: Messages = [{"role": "user", "content": "What drives science?"}]
    async with hub_factory() as hub:
        client = async_client(hub)
        answer = await client.chat.completions.create(model="science-panel", messages=question)
        for who, said in (
            ("Albert Einstein", "Imagination."),
            ("Marie Curie", "Nothing is to be feared."),
            ("Charles Darwin", "Adapt."),
        ):
            llm.script_for(f"You are {who}.", Reply(said))
        stream = await client.chat.completions.create(
            model="science-panel", messages=question, stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    text = answer.choices[0].message.content or ""
    assert streamed == text
    for name, said in (
        ("Albert Einstein", "Imagination."),
        ("Marie Curie", "Nothing is to be feared."),
        ("Charles Darwin", "Adapt."),
    ):
        assert name in text
        assert said in text
    assert answer.usage is not None
    assert answer.usage.total_tokens > 0


# A request as SillyTavern's Chat Completion source (Custom, OpenAI-compatible) sends it
# (its server's chat-completions backend): its main prompt and the character's card as
# system messages, example messages named, the chat, sampling it always sends.
SILLYTAVERN_BODY = {
    "messages": [
        {"role": "system", "content": "Write Socrates's next reply in a fictional chat."},
        {"role": "system", "content": "[Start a new chat]"},
        {"role": "system", "name": "example_user", "content": "What is virtue?"},
        {"role": "system", "name": "example_assistant", "content": "Let us ask together."},
        {"role": "assistant", "content": "Greetings, friend."},
        {"role": "user", "content": "Is the unexamined life worth living?"},
    ],
    "model": "socrates",
    "temperature": 1,
    "max_tokens": 300,
    "stream": True,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "top_p": 1,
    "top_k": 0,
    "stop": [],
    "logit_bias": {},
    "seed": -1,
    "n": 1,
}

# A request as Open WebUI sends it to an OpenAI connection: the model, the chat, stream.
OPEN_WEBUI_BODY = {
    "model": "socrates",
    "messages": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hello, friend."},
        {"role": "user", "content": [{"type": "text", "text": "What is justice?"}]},
    ],
    "stream": True,
    "stream_options": {"include_usage": True},
}


def sse_data(text: str) -> list[str]:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


async def test_sillytavern_and_open_webui_requests_are_answered(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(Reply("It is not."), Reply("Justice is harmony."))
    async with hub_factory() as hub:
        tavern = await hub.http.post(
            "/v1/chat/completions",
            json=SILLYTAVERN_BODY,
            headers={"Authorization": "Bearer sk-anything"},
        )
        webui = await hub.http.post("/v1/chat/completions", json=OPEN_WEBUI_BODY)
        models = await hub.http.get("/v1/models")
    assert tavern.status_code == 200
    assert tavern.headers["content-type"].startswith("text/event-stream")
    frames = sse_data(tavern.text)
    assert frames[-1] == "[DONE]"
    said = [json.loads(f)["choices"][0]["delta"].get("content") for f in frames[:-1]]
    assert "".join(piece for piece in said if piece) == "It is not."
    # The client's leading system message is the caller's instructions, after the
    # persona's; its named examples stay where it put them.
    shown = llm.requests[0]["messages"]
    assert "Socrates" in shown[0]["content"]
    assert shown[1]["content"].startswith("Write Socrates's next reply")
    assert {"role": "system", "name": "example_user", "content": "What is virtue?"} in shown

    frames = sse_data(webui.text)
    assert frames[-1] == "[DONE]"
    assert json.loads(frames[-2])["usage"]["total_tokens"] > 0
    assert llm.requests[1]["messages"][-1] == {"role": "user", "content": "What is justice?"}
    assert "socrates" in {m["id"] for m in models.json()["data"]}


async def test_the_door_can_be_turned_off(hub_factory: HubFactory) -> None:
    async with hub_factory(openai_server=False) as hub:
        response = await hub.http.get("/v1/models")
    assert response.status_code == 404


async def test_a_request_over_the_limits_is_refused(hub_factory: HubFactory, llm: FakeLLM) -> None:
    async with hub_factory(openai_max_messages=2, max_message_bytes=4096) as hub:
        many = await hub.http.post(
            "/v1/chat/completions",
            json={"model": "socrates", "messages": [{"role": "user", "content": "hi"}] * 3},
        )
        large = await hub.http.post(
            "/v1/chat/completions",
            json={"model": "socrates", "messages": [{"role": "user", "content": "x" * 5000}]},
        )
        image = await hub.http.post(
            "/v1/chat/completions",
            json={
                "model": "socrates",
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ],
            },
        )
    assert many.status_code == 400
    assert "PERSONA_AGENT_OPENAI_MAX_MESSAGES" in many.json()["error"]["message"]
    assert large.status_code == 413
    assert image.status_code == 400
    assert image.json()["error"]["code"] == "unsupported_content"
    assert llm.requests == []


async def test_a_failing_model_is_a_502(hub_factory: HubFactory, llm: FakeLLM) -> None:
    llm.script(Fail(500, "the model is down"))
    async with hub_factory() as hub:
        with pytest.raises(openai.InternalServerError) as failed:
            await async_client(hub).chat.completions.create(
                model="socrates", messages=[{"role": "user", "content": "Hello"}]
            )
    assert failed.value.status_code == 502
    assert isinstance(failed.value.body, dict)


async def test_the_door_behind_a_proxys_root_path(hub_factory: HubFactory, llm: FakeLLM) -> None:
    llm.script(Reply("From behind the proxy."))
    async with hub_factory() as hub:
        transport = httpx.ASGITransport(app=hub.app, root_path="/hub")
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            models = await http.get("/hub/v1/models")
            answer = await http.post(
                "/hub/v1/chat/completions",
                json={"model": "socrates", "messages": [{"role": "user", "content": "Hi"}]},
            )
    assert "socrates" in {model["id"] for model in models.json()["data"]}
    assert answer.json()["choices"][0]["message"]["content"] == "From behind the proxy."


async def test_a_client_that_leaves_before_a_whole_answer_cancels_the_model_call(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(Hang())
    async with hub_factory() as hub:
        asking = asyncio.create_task(
            async_client(hub).chat.completions.create(
                model="socrates", messages=[{"role": "user", "content": "Hello?"}]
            )
        )
        await asyncio.to_thread(llm.wait_requests, 1)
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
        await asyncio.to_thread(llm.wait_disconnect)
    assert llm.disconnects == 1


async def test_an_answer_cut_at_the_token_cap_finishes_with_length(
    hub_factory: HubFactory, llm: FakeLLM
) -> None:
    llm.script(Reply("It was the best", finish="length"), Reply("of times", finish="length"))
    question: Messages = [{"role": "user", "content": "Tell a tale."}]
    async with hub_factory() as hub:
        client = async_client(hub)
        whole = await client.chat.completions.create(
            model="socrates", messages=question, max_tokens=4
        )
        stream = await client.chat.completions.create(
            model="socrates", messages=question, max_tokens=2, stream=True
        )
        finishes = [c.choices[0].finish_reason async for c in stream if c.choices]
    assert whole.choices[0].finish_reason == "length"
    assert finishes[-1] == "length"
