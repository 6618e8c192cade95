"""The scripted fake LLM speaks the OpenAI wire format that the hub's tests rely on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.fake_llm import Fail, FakeLLM, Reply, ToolCalls

ASK = {"model": "m", "messages": [{"role": "user", "content": "Hi there"}]}


@pytest.fixture
def http(fake: FakeLLM) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.base_url, timeout=5) as client:
        yield client


def events(response: httpx.Response) -> list[Any]:
    """The JSON payloads of an SSE body; the last event must be ``[DONE]``."""
    data = [line[6:] for line in response.text.split("\n\n") if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(d) for d in data[:-1]]


def test_non_streaming_text_answer(fake: FakeLLM, http: httpx.Client) -> None:
    fake.script(Reply("Plain answer.", usage=(3, 2)))
    body = http.post("/chat/completions", json=ASK).json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Plain answer."}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert fake.requests == [ASK]


def test_streaming_text_in_word_chunks_with_a_usage_chunk(
    fake: FakeLLM, http: httpx.Client
) -> None:
    fake.script(Reply("Three little words"))
    ask = {**ASK, "stream": True, "stream_options": {"include_usage": True}}
    with http.stream("POST", "/chat/completions", json=ask) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        response.read()
    *chunks, usage = events(response)
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks]
    assert deltas == ["", "Three", " little", " words", None]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 3
    assert fake.chunks_sent == 3


def test_own_writes_stream_the_same_events_and_health_counts_the_chunks(
    fake: FakeLLM, http: httpx.Client
) -> None:
    fake.script(Reply("Three little words", own_writes=True))
    ask = {**ASK, "stream": True}
    with http.stream("POST", "/chat/completions", json=ask) as response:
        response.read()
    chunks = events(response)
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks]
    assert deltas == ["", "Three", " little", " words", None]
    health = httpx.get(fake.base_url.removesuffix("/v1") + "/health").json()
    assert health == {"status": "ok", "requests": 1, "chunks": 3}


def test_a_held_answer_writes_its_first_chunks_and_the_rest_once_released(
    fake: FakeLLM, http: httpx.Client
) -> None:
    fake.script(Reply("One two three four", hold_after=2))
    with http.stream("POST", "/chat/completions", json={**ASK, "stream": True}) as response:
        lines = response.iter_lines()
        got: list[str] = []
        while len(got) < 3:  # the role's empty delta, then the two chunks before the hold
            line = next(lines)
            if line.startswith("data: "):
                got.append(json.loads(line[6:])["choices"][0]["delta"]["content"])
        fake.wait_held()
        assert (got, fake.chunks_sent) == (["", "One", " two"], 2)
        fake.release()
        rest = [line[6:] for line in lines if line.startswith("data: ")]
    assert [json.loads(r)["choices"][0]["delta"].get("content") for r in rest[:-1]] == [
        " three",
        " four",
        None,
    ]
    assert fake.chunks_sent == 4


def test_streamed_tool_calls_come_as_openai_sends_them(fake: FakeLLM, http: httpx.Client) -> None:
    fake.script(ToolCalls([("add", {"a": 1, "b": 2}), ("echo", "{bad")]))
    response = http.post("/chat/completions", json={**ASK, "stream": True})
    chunks = events(response)
    parts = [p for c in chunks for p in c["choices"][0]["delta"].get("tool_calls", [])]
    firsts = [p for p in parts if "id" in p]
    assert [(p["index"], p["function"]) for p in firsts] == [
        (0, {"name": "add", "arguments": ""}),
        (1, {"name": "echo", "arguments": ""}),
    ]
    arguments = [
        "".join(p["function"]["arguments"] for p in parts if p["index"] == i) for i in (0, 1)
    ]
    assert json.loads(arguments[0]) == {"a": 1, "b": 2}
    assert arguments[1] == "{bad"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert "usage" not in chunks[-1]  # include_usage was not asked for


def test_tool_choice_none_always_gets_text(fake: FakeLLM, http: httpx.Client) -> None:
    fake.script(ToolCalls([("add", {"a": 1})]), Reply("next"))
    body = http.post("/chat/completions", json={**ASK, "tool_choice": "none"}).json()
    assert body["choices"][0]["message"]["content"] == "Final answer without tools."
    body = http.post("/chat/completions", json=ASK).json()
    assert body["choices"][0]["message"]["content"] == "next"  # the ToolCalls was used up


def test_default_reply_echoes_the_last_user_message(http: httpx.Client) -> None:
    body = http.post("/chat/completions", json=ASK).json()
    content = body["choices"][0]["message"]["content"]
    assert content == "Hello from the fake LLM. You said: Hi there"


def test_failures_carry_status_headers_and_an_openai_error_body(
    fake: FakeLLM, http: httpx.Client
) -> None:
    fake.script(Fail(429, "slow down", headers={"Retry-After": "0"}))
    response = http.post("/chat/completions", json=ASK)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "0"
    assert response.json()["error"]["message"] == "slow down"


def test_a_retry_before_its_retry_after_is_refused_and_counted(
    fake: FakeLLM, http: httpx.Client
) -> None:
    fake.script(Fail(429, "slow down", headers={"Retry-After": "60"}), Reply("At last."))
    assert http.post("/chat/completions", json=ASK).status_code == 429
    early = http.post("/chat/completions", json=ASK)  # the same request, at once
    assert early.status_code == 429
    assert 0 < float(early.headers["retry-after-ms"]) <= 60_000
    assert fake.too_early == 1
    other = {**ASK, "messages": [{"role": "user", "content": "Something else"}]}
    assert http.post("/chat/completions", json=other).json()["choices"][0]["message"] == {
        "role": "assistant",
        "content": "At last.",  # another request is not held off, and the script waited
    }
    assert len(fake.requests) == 3


def test_a_retry_after_its_retry_after_is_answered(fake: FakeLLM, http: httpx.Client) -> None:
    fake.script(Fail(503, "busy", headers={"retry-after-ms": "1"}), Reply("Now."))
    assert http.post("/chat/completions", json=ASK).status_code == 503
    fake.hold_off(ASK, 0)  # as if the millisecond had passed: the server's clock decides
    assert http.post("/chat/completions", json=ASK).json()["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Now.",
    }
    assert fake.too_early == 0


def test_models_and_unknown_routes(http: httpx.Client) -> None:
    assert http.get("/models").json()["data"][0]["id"] == "fake-llm"
    assert http.get("/nothing").status_code == 404


def test_script_for_answers_by_the_system_prompt_before_the_common_script(
    fake: FakeLLM, http: httpx.Client
) -> None:
    def ask(system: str) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}]
        body = http.post("/chat/completions", json={"model": "m", "messages": messages}).json()
        return str(body["choices"][0]["message"]["content"])

    fake.script(Reply("common 1"), Reply("common 2"))
    fake.script_for("You are Ada.", Reply("Ada 1"), Reply("Ada 2"))
    fake.script_for("You are Bob.", Reply("Bob 1"))
    assert ask("You are Bob. Speak as Bob.") == "Bob 1"
    assert ask("You are Ada. Speak as Ada.") == "Ada 1"
    assert ask("You are Bob. Speak as Bob.") == "common 1"  # Bob's script is used up
    assert ask("You are Ada.") == "Ada 2"
    assert ask("No one in particular.") == "common 2"
    fake.script_for("You are Ada.", Reply("forgotten"))
    fake.reset()
    assert ask("You are Ada.").startswith("Hello from the fake LLM.")


def test_reset_forgets_the_script_and_counters(fake: FakeLLM, http: httpx.Client) -> None:
    fake.script(Reply("scripted"))
    http.post("/chat/completions", json=ASK)
    fake.wait_requests(1, timeout=1)
    fake.script(Reply("left over"))
    fake.reset()
    assert (fake.requests, fake.disconnects, fake.chunks_sent) == ([], 0, 0)
    body = http.post("/chat/completions", json=ASK).json()
    assert body["choices"][0]["message"]["content"].startswith("Hello from the fake LLM.")


def test_waits_are_bounded(fake: FakeLLM) -> None:
    with pytest.raises(AssertionError, match=r"waited 0\.05s for 1 request"):
        fake.wait_requests(1, timeout=0.05)
    with pytest.raises(AssertionError, match="disconnect"):
        fake.wait_disconnect(timeout=0.05)
