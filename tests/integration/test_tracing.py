"""OpenTelemetry traces from a real ``persona-agent serve`` process, to a real OTLP receiver
(over HTTP and gRPC): the span tree of a streamed task with a tool call, under the
caller's ``traceparent``, joined by the model server and the MCP server it called."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from persona_agent.llm.observed import PURPOSE_ATTRIBUTE
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCalls
from tests.servers.hub_process import hub_process
from tests.servers.otlp_receiver import OTLPReceiver, ReceivedSpan

MODEL = "gpt-4o-mini"


@pytest.fixture(params=["http", "grpc"])
def receiver(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OTLPReceiver]:
    protocol = request.param
    with OTLPReceiver(protocol) as running:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", running.endpoint)
        monkeypatch.setenv(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc" if protocol == "grpc" else "http/protobuf"
        )
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export at once, not every 5 s
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
        monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
        yield running


def _stream(url: str, text: str, traceparent: str, context_id: str = "") -> list[dict[str, Any]]:
    """A SendStreamingMessage to toolsmith over JSON-RPC (in ``context_id``, when given);
    every event's ``result``."""
    message: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if context_id:
        message["contextId"] = context_id
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    headers = {"A2A-Version": "1.0", "traceparent": traceparent}
    events: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{url}/a2a/toolsmith/", json=body, headers=headers, timeout=30
    ) as reply:
        for line in reply.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:])["result"])
    return events


def _tool_result(events: list[dict[str, Any]]) -> dict[str, Any]:
    for event in events:
        for part in (
            event.get("statusUpdate", {}).get("status", {}).get("message", {}).get("parts", [])
        ):
            data = part.get("data")
            if isinstance(data, dict) and data.get("kind") == "tool-result":
                return dict(json.loads(data["result"]))
    raise AssertionError(f"no tool result in {events}")


def _parent(traceparent: str) -> tuple[str, str]:
    """A ``traceparent``'s trace id and parent span id."""
    version, trace_id, span_id, _flags = traceparent.split("-")
    assert version == "00"
    return trace_id, span_id


def _ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[str]:
    """The ids of the span's ancestors received, nearest first, then the first one missing
    (the caller's span, for the hub's outermost)."""
    chain: list[str] = []
    parent = span.parent_span_id
    while parent:
        chain.append(parent)
        if parent not in by_id:
            break
        parent = by_id[parent].parent_span_id
    return chain


def test_a_streamed_task_with_a_tool_call_is_one_trace(
    tmp_path: Path,
    personas_dir: Path,
    llm: FakeLLM,
    mcp_config_file: Path,
    receiver: OTLPReceiver,
) -> None:
    client_trace, client_span = secrets.token_hex(16), secrets.token_hex(8)
    llm.script(ToolCalls([("remote__traceparent", {})]), Reply("Traced.", usage=(30, 5)))
    settings = {
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "test",
        "LLM_MODEL": MODEL,
        "LLM_MAX_RETRIES": "0",
        "MCP_CONFIG": str(mcp_config_file),
    }
    with hub_process(personas_dir, tmp_path / "data", **settings) as (url, _):
        events = _stream(url, "Show me your trace.", f"00-{client_trace}-{client_span}-01")
        text = "".join(
            part.get("text", "")
            for event in events
            if "artifactUpdate" in event
            for part in event["artifactUpdate"]["artifact"]["parts"]
        )
        assert text == "Traced."
        final = events[-1]["statusUpdate"]
        assert final["status"]["state"] == "TASK_STATE_COMPLETED"
        task_id, context_id = final["taskId"], final["contextId"]

        def complete(spans: list[ReceivedSpan]) -> bool:
            """The trace is whole: the spans looked for, and every span's parents (spans
            end, and are sent, after their children)."""
            mine = [s for s in spans if s.trace_id == client_trace]
            names = [s.name for s in mine]
            by_id = {span.span_id: span for span in mine}
            return (
                any(n.startswith("invoke_agent") for n in names)
                and names.count(f"chat {MODEL}") == 2
                and any(n.startswith("MCP send tools/call") for n in names)
                and all(_ancestors(s, by_id)[-1] == client_span for s in mine)
            )

        spans = [s for s in receiver.wait_for(complete) if s.trace_id == client_trace]

    by_id = {span.span_id: span for span in spans}
    assert {span.service_name for span in spans} == {"persona-agent"}
    # The SDK's own span of the request is the hub's outermost, under the caller's span.
    (outermost,) = [s for s in spans if s.name.endswith("JsonRpcDispatcher.handle_requests")]
    assert outermost.parent_span_id == client_span
    assert outermost.kind == "SPAN_KIND_SERVER"
    assert all(_ancestors(s, by_id)[-1] == client_span for s in spans)

    (turn,) = [s for s in spans if s.name == "invoke_agent toolsmith"]
    assert outermost.span_id in _ancestors(turn, by_id)
    assert turn.attributes["a2a.task.id"] == task_id
    assert turn.attributes["a2a.context.id"] == context_id
    assert turn.attributes["persona_agent.persona.id"] == "toolsmith"
    assert turn.attributes["a2a.task.state"] == "completed"

    chats = [s for s in spans if s.name == f"chat {MODEL}"]
    assert all(turn.span_id in _ancestors(chat, by_id) for chat in chats)
    assert all(chat.kind == "SPAN_KIND_CLIENT" for chat in chats)
    assert sorted(tuple(c.attributes["gen_ai.response.finish_reasons"]) for c in chats) == [  # type: ignore[arg-type]
        ("stop",),
        ("tool_calls",),
    ]
    (answer,) = [c for c in chats if c.attributes["gen_ai.response.finish_reasons"] == ["stop"]]
    assert answer.attributes["gen_ai.operation.name"] == "chat"
    assert answer.attributes["gen_ai.request.model"] == MODEL
    assert answer.attributes["gen_ai.usage.input_tokens"] == 30
    assert answer.attributes["gen_ai.usage.output_tokens"] == 5
    assert float(answer.attributes["gen_ai.response.time_to_first_chunk"]) > 0  # type: ignore[arg-type]

    # The model server saw each call with its span as the parent.
    seen = [_parent(request.headers["traceparent"]) for request in llm.seen]
    assert sorted(seen) == sorted((client_trace, chat.span_id) for chat in chats)

    (tool,) = [s for s in spans if s.name == "execute_tool remote__traceparent"]
    assert turn.span_id in _ancestors(tool, by_id)
    assert tool.attributes["mcp.server"] == "remote"
    assert tool.attributes["mcp.tool"] == "traceparent"
    assert tool.attributes["persona_agent.tool.outcome"] == "ok"
    (mcp_send,) = [s for s in spans if s.name.startswith("MCP send tools/call")]
    assert mcp_send.parent_span_id == tool.span_id
    # The MCP server got the trace in the request's _meta and in its HTTP headers.
    received = _tool_result(events)
    assert _parent(received["meta"]) == (client_trace, mcp_send.span_id)
    assert _parent(received["header"]) == (client_trace, mcp_send.span_id)

    writes = [s for s in spans if s.attributes.get("db.system.name") == "sqlite"]
    assert writes
    assert all(s.name.split()[0] in ("INSERT", "UPDATE", "DELETE") for s in writes)
    assert any(turn.span_id in _ancestors(s, by_id) for s in writes)  # the turn's history


def test_a_memory_search_is_a_span_of_the_task_with_its_hits_and_tokens(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/memory.md: each search of a caller's memory for a turn's prompt is a span
    under the task's, saying what it found (the third turn recalls the first, which has
    left the window of two messages)."""
    llm.script(Reply("Noted."), Reply("Fine."), Reply("Biscuit."))
    said = ["My dog is called Biscuit.", "Let us speak of virtue.", "What is my dog called?"]
    with OTLPReceiver("http") as receiver:
        _export_to(receiver, monkeypatch)
        settings = {
            "LLM_BASE_URL": llm.base_url,
            "LLM_API_KEY": "test",
            "MEMORY": "on",
            "HISTORY_MAX_MESSAGES": "2",
        }
        with hub_process(personas_dir, tmp_path / "data", **settings) as (url, _):
            traces = _conversation(url, said)

            def searched(spans: list[ReceivedSpan]) -> bool:
                names = {(s.trace_id, s.name) for s in spans}
                wanted = ("memory_search toolsmith", "invoke_agent toolsmith")
                return all((t, name) in names for t in traces for name in wanted)

            spans = receiver.wait_for(searched)
    by_id = {span.span_id: span for span in spans}
    searches = []
    for trace in traces:
        (search,) = [s for s in spans if s.trace_id == trace and s.name.startswith("memory_")]
        (turn,) = [s for s in spans if s.trace_id == trace and s.name.startswith("invoke_")]
        assert turn.span_id in _ancestors(search, by_id)
        assert search.attributes["persona_agent.persona.id"] == "toolsmith"
        searches.append(search.attributes)
    assert [a["persona_agent.memory.outcome"] for a in searches] == ["miss", "miss", "hit"]
    assert [a["persona_agent.memory.hits"] for a in searches][:2] == [0, 0]
    recalled = searches[2]
    assert int(str(recalled["persona_agent.memory.hits"])) >= 1
    fact = "The user said: My dog is called Biscuit."
    assert int(str(recalled["persona_agent.memory.tokens"])) >= len(fact) // 4


def test_a_running_summarys_model_call_is_a_span_as_a_turns_is(
    tmp_path: Path, personas_dir: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/observability.md: the model call that makes a running summary (docs/memory.md)
    is a ``chat {model}`` span, marked as the summary's, in the trace of the turn after
    which it was made (the third turn: its first has left the window of four messages)."""
    llm.script_summary(Reply("The user has a dog called Biscuit.", usage=(40, 6)))
    said = ["My dog is called Biscuit.", "Let us speak of virtue.", "What is courage?"]
    with OTLPReceiver("http") as receiver:
        _export_to(receiver, monkeypatch)
        settings = {
            "LLM_BASE_URL": llm.base_url,
            "LLM_API_KEY": "test",
            "LLM_MODEL": MODEL,
            "MEMORY": "on",
            "HISTORY_MAX_MESSAGES": "4",
        }
        with hub_process(personas_dir, tmp_path / "data", **settings) as (url, _):
            traces = _conversation(url, said)

            def summarized(spans: list[ReceivedSpan]) -> bool:
                return any(s.attributes.get(PURPOSE_ATTRIBUTE) == "summary" for s in spans)

            spans = receiver.wait_for(summarized)
    (summary,) = [s for s in spans if s.attributes.get(PURPOSE_ATTRIBUTE) == "summary"]
    assert summary.trace_id == traces[2]  # after the turn that pushed the first out
    assert summary.name == f"chat {MODEL}"
    assert summary.kind == "SPAN_KIND_CLIENT"
    assert summary.attributes["gen_ai.operation.name"] == "chat"
    assert summary.attributes["gen_ai.request.model"] == MODEL
    assert summary.attributes["gen_ai.usage.input_tokens"] == 40
    assert summary.attributes["gen_ai.usage.output_tokens"] == 6
    assert summary.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    turns = [s for s in spans if s.name == f"chat {MODEL}" and s is not summary]
    assert all(PURPOSE_ATTRIBUTE not in s.attributes for s in turns)  # a turn's is unmarked


def _export_to(receiver: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub started after this exports its spans to ``receiver`` over OTLP/HTTP, at once."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)


def _conversation(url: str, said: list[str]) -> list[str]:
    """Each of ``said`` streamed to the hub at ``url`` in one conversation, each in a trace
    of its own: the trace ids, in order."""
    traces = [secrets.token_hex(16) for _ in said]
    context = ""
    for trace, text in zip(traces, said, strict=True):
        events = _stream(url, text, f"00-{trace}-{'1' * 16}-01", context)
        context = events[-1]["statusUpdate"]["contextId"]
    return traces
