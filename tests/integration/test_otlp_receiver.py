"""The OTLP receiver itself (tests/servers/otlp_receiver.py): spans exported by the real
OpenTelemetry SDK and its real OTLP exporters, over HTTP and over gRPC, come out decoded.

Each test makes its own tracer provider; the global one is left alone.
"""

from __future__ import annotations

import os

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from tests.servers.otlp_receiver import OTLPProtocol, OTLPReceiver, ReceivedSpan

SERVICE = "otlp-receiver-test"


@pytest.fixture(autouse=True)
def _no_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exporters read OTEL_* when made: none of the machine's may reach them."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def _provider(protocol: OTLPProtocol, batch: bool) -> TracerProvider:
    """A tracer provider exporting to OTEL_EXPORTER_OTLP_ENDPOINT over ``protocol``."""
    exporter = HttpSpanExporter() if protocol == "http" else GrpcSpanExporter()
    processor: SpanProcessor = (
        BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    )
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(processor)
    return provider


def _hex(number: int, digits: int) -> str:
    return format(number, f"0{digits}x")


@pytest.mark.parametrize("batch", [False, True], ids=["simple", "batch"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_spans_exported_by_the_sdk_are_received_decoded(
    protocol: OTLPProtocol, batch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OTLPReceiver(protocol) as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        provider = _provider(protocol, batch)
        tracer = provider.get_tracer("tests.otlp_receiver")
        with tracer.start_as_current_span("POST /a2a", kind=SpanKind.SERVER) as parent:
            parent.set_attributes(
                {
                    "http.request.method": "POST",
                    "http.response.status_code": 200,
                    "persona.temperature": 0.5,
                    "persona.streaming": True,
                    "persona.tools": ["search", "calculator"],
                    "persona.token_counts": [3, 5],
                }
            )
            with tracer.start_as_current_span("llm.call", kind=SpanKind.CLIENT) as child:
                child.set_status(Status(StatusCode.ERROR, "upstream failed"))
        provider.shutdown()

        spans = receiver.wait_for(lambda spans: len(spans) >= 2)

    by_name = {span.name: span for span in spans}
    assert sorted(by_name) == ["POST /a2a", "llm.call"]
    server, client = by_name["POST /a2a"], by_name["llm.call"]
    parent_context, child_context = parent.get_span_context(), child.get_span_context()
    assert server.trace_id == client.trace_id == _hex(parent_context.trace_id, 32)
    assert server.span_id == _hex(parent_context.span_id, 16)
    assert client.span_id == _hex(child_context.span_id, 16)
    assert server.parent_span_id == ""
    assert client.parent_span_id == server.span_id
    assert (server.kind, client.kind) == ("SPAN_KIND_SERVER", "SPAN_KIND_CLIENT")
    assert (server.status_code, client.status_code) == ("STATUS_CODE_UNSET", "STATUS_CODE_ERROR")
    assert server.attributes == {
        "http.request.method": "POST",
        "http.response.status_code": 200,
        "persona.temperature": 0.5,
        "persona.streaming": True,
        "persona.tools": ["search", "calculator"],
        "persona.token_counts": [3, 5],
    }
    assert client.attributes == {}
    assert {span.service_name for span in spans} == {SERVICE}
    assert receiver.requests >= 1


def test_otlp_json_is_received_with_hex_ids() -> None:
    trace_id, span_id, parent_id = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "e" * 16
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "json-svc"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "manual"},
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": span_id,
                                "parentSpanId": parent_id,
                                "name": "by hand",
                                "kind": 3,
                                "startTimeUnixNano": "1544712660000000000",
                                "endTimeUnixNano": "1544712661000000000",
                                "attributes": [
                                    {"key": "n", "value": {"intValue": "42"}},
                                    {"key": "ok", "value": {"boolValue": False}},
                                ],
                                "status": {"code": 1},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    with OTLPReceiver("http") as receiver:
        reply = httpx.post(f"{receiver.endpoint}/v1/traces", json=body, timeout=10)
        assert reply.status_code == 200
        assert reply.headers["content-type"] == "application/json"
        assert reply.json() == {}
        assert receiver.spans == [
            ReceivedSpan(
                name="by hand",
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent_id,
                kind="SPAN_KIND_CLIENT",
                attributes={"n": 42, "ok": False},
                status_code="STATUS_CODE_OK",
                service_name="json-svc",
            )
        ]


def test_other_paths_and_content_types_are_refused() -> None:
    with OTLPReceiver("http") as receiver:
        url = f"{receiver.endpoint}/v1/traces"
        assert (
            httpx.post(f"{receiver.endpoint}/v1/logs", content=b"", timeout=10).status_code == 404
        )
        plain = httpx.post(url, content=b"x", headers={"content-type": "text/plain"}, timeout=10)
        assert plain.status_code == 415
        garbage = httpx.post(
            url, content=b"\xff\xff", headers={"content-type": "application/x-protobuf"}, timeout=10
        )
        assert garbage.status_code == 400
        assert receiver.spans == []
        assert receiver.requests == 0


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_wait_for_names_the_spans_received_when_it_gives_up(
    protocol: OTLPProtocol, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OTLPReceiver(protocol) as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        provider = _provider(protocol, batch=False)
        with provider.get_tracer("tests.otlp_receiver").start_as_current_span("only"):
            pass
        provider.shutdown()
        with pytest.raises(AssertionError, match=r"1 spans received: \['only'\]"):
            receiver.wait_for(lambda spans: any(span.name == "never" for span in spans), 0.2)
        receiver.clear()
        assert receiver.spans == []
