"""Which ``OTEL_*`` environments turn traces on, and the clear errors of the ones the hub
cannot serve (checked before any tracer provider is set)."""

from __future__ import annotations

import pytest

from persona_agent.errors import ConfigError
from persona_agent.observe.tracing import remote_context, requested_exporters, start_tracing

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


@pytest.mark.parametrize(
    ("environ", "exporters"),
    [
        ({}, []),
        (ENDPOINT, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, []),
        ({"OTEL_TRACES_EXPORTER": "console"}, ["console"]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ["otlp", "console"]),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, []),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, []),
    ],
)
def test_traces_are_on_only_when_the_environment_names_an_exporter(
    environ: dict[str, str], exporters: list[str]
) -> None:
    assert requested_exporters(environ) == exporters


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json is not supported"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "zipkin is not supported"),
    ],
)
def test_an_exporter_the_hub_cannot_serve_is_a_clear_error(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        start_tracing(environ)


def test_the_callers_trace_context_is_read_from_its_headers() -> None:
    from opentelemetry.trace import get_current_span

    trace_id, span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    headers = [(b"traceparent", f"00-{trace_id}-{span_id}-01".encode()), (b"host", b"x")]
    parent = remote_context(headers)
    assert parent is not None
    context = get_current_span(parent).get_span_context()
    assert (f"{context.trace_id:032x}", f"{context.span_id:016x}") == (trace_id, span_id)
    assert remote_context([(b"host", b"x")]) is None


def test_with_tracing_off_a_hub_span_is_the_callers_context_and_attaches_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry import context as otel_context
    from opentelemetry.trace import get_current_span

    from persona_agent.observe import tracing

    monkeypatch.setattr(tracing, "_active", False)  # no provider: the hub's default
    trace_id, span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    parent = remote_context([(b"traceparent", f"00-{trace_id}-{span_id}-01".encode())])
    assert parent is not None
    token = otel_context.attach(parent)
    try:
        before = otel_context.get_current()
        with tracing.TRACER.start_as_current_span("db write") as span:
            assert otel_context.get_current() is before  # nothing attached
            assert not span.is_recording()
            # The context the API's no-op span would have carried: the log lines' trace ids.
            assert get_current_span().get_span_context() == span.get_span_context()
            assert f"{span.get_span_context().trace_id:032x}" == trace_id
        # An error goes through, as it did.
        with pytest.raises(ValueError, match="raised"), tracing.TRACER.start_as_current_span("c"):
            raise ValueError("raised")
        assert otel_context.get_current() is before
    finally:
        otel_context.detach(token)
