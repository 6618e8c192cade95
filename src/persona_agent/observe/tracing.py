"""OpenTelemetry traces: off unless the standard ``OTEL_*`` environment asks for them.

:func:`start_tracing` sets the process's tracer provider when ``OTEL_TRACES_EXPORTER``
names an exporter, or an OTLP endpoint is given (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); the exporter reads the rest of its
``OTEL_EXPORTER_OTLP_*`` settings itself. Then the a2a-sdk's own spans (one per request,
kept as the SDK makes them), the MCP SDK's, and the hub's (:data:`TRACER`: the persona's
turn, each model call, each tool call, each database write) go to that exporter; the
incoming W3C ``traceparent`` is their parent (:func:`remote_context`), and it goes on
with the model server's HTTP request (:func:`trace_headers`) and each MCP request
(the MCP SDK puts it in ``params._meta``; over HTTP, the hub adds the header too).

Off, the hub's spans are no work at all (:data:`TRACER` gives the span under way back,
where the OpenTelemetry API would attach a no-op span with the same context: some 15 µs
of CPU a span, six a blocking send), the SDK's are the API's no-ops; nothing is exported
or recorded, and the OpenTelemetry SDK and its exporters are not even imported (only the
API is).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind
from opentelemetry.util.types import Attributes

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

from persona_agent import __version__
from persona_agent.errors import ConfigError

__all__ = [
    "TRACER",
    "active",
    "remote_context",
    "requested_exporters",
    "start_tracing",
    "trace_headers",
]

logger = logging.getLogger(__name__)

_PROPAGATED = (b"traceparent", b"tracestate", b"baggage")
_active = False


class _Untraced(AbstractContextManager[Span]):
    """A span while tracing is off: the span under way (the API's no-op span, or the
    caller's context as a non-recording span), with nothing attached or detached."""

    def __enter__(self) -> Span:
        return trace.get_current_span()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


_UNTRACED = _Untraced()


class HubTracer:
    """The hub's spans: the OpenTelemetry API's tracer (a proxy, real once a provider is
    set) while spans are recorded (:func:`active`), else :class:`_Untraced`. With no
    provider the API's span would be a non-recording span with the context of the one
    under way, attached then detached: the same context, which the log lines' trace ids
    read, at the cost of three context managers and a context copy."""

    def __init__(self) -> None:
        self._tracer = trace.get_tracer("persona-agent", __version__)

    def start_as_current_span(
        self, name: str, *, kind: SpanKind = SpanKind.INTERNAL, attributes: Attributes = None
    ) -> AbstractContextManager[Span]:
        if not _active:
            return _UNTRACED
        return self._tracer.start_as_current_span(name, kind=kind, attributes=attributes)


TRACER = HubTracer()
"""The hub's own spans."""


def active() -> bool:
    """Whether spans are recorded in this process (a provider of the OpenTelemetry SDK is
    set: by :func:`start_tracing`, or by ``opentelemetry-instrument``)."""
    return _active


def requested_exporters(environ: Mapping[str, str]) -> list[str]:
    """The span exporters the environment asks for (none: tracing is off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = environ.get("OTEL_TRACES_EXPORTER")
    if names is not None:
        chosen = [name.strip().lower() for name in names.split(",") if name.strip()]
        return [] if "none" in chosen else chosen
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return ["otlp"] if any(environ.get(name, "").strip() for name in endpoints) else []


def start_tracing(environ: Mapping[str, str]) -> TracerProvider | None:
    """Set the process's tracer provider as the environment says; the provider (to shut
    down at exit: it flushes the spans not yet sent), or None when tracing is off or a
    provider was set already (by ``opentelemetry-instrument``, say: it is kept).

    Raises:
        ConfigError: an exporter or protocol that is not supported, or not installed.
    """
    global _active
    current = trace.get_tracer_provider()  # (OTEL_PYTHON_TRACER_PROVIDER: made here)
    # A provider of the SDK's is set only if the SDK is imported: not imported, it stays so.
    sdk_trace = sys.modules.get("opentelemetry.sdk.trace")
    if sdk_trace is not None and isinstance(current, sdk_trace.TracerProvider):
        _active = True
        return None
    exporters = [_exporter(name, environ) for name in requested_exporters(environ)]
    if not exporters:
        return None
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes: dict[str, str] = {SERVICE_VERSION: __version__}
    named = "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if not environ.get("OTEL_SERVICE_NAME") and not named:
        attributes[SERVICE_NAME] = "persona-agent"
    provider = TracerProvider(resource=Resource.create(attributes))  # OTEL_TRACES_SAMPLER too
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _active = True
    logger.info("Tracing: spans go to %s", ", ".join(type(e).__name__ for e in exporters))
    return provider


def _exporter(name: str, environ: Mapping[str, str]) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER={name} is not supported: use otlp, console or none"
        )
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcSpanExporter,
            )
        except ImportError:
            raise ConfigError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter: install "
                "persona-agent[otlp-grpc] (or use http/protobuf, the default)"
            ) from None
        return GrpcSpanExporter()
    if protocol != "http/protobuf":
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported: use http/protobuf "
            "(the default) or grpc"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def remote_context(headers: list[tuple[bytes, bytes]]) -> Context | None:
    """The caller's trace context from an ASGI request's W3C headers, if it sent any."""
    carrier = {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in headers
        if name in _PROPAGATED
    }
    return propagate.extract(carrier) if carrier else None


def trace_headers() -> dict[str, str]:
    """The W3C headers (``traceparent``, ``tracestate``) of the current span, for an
    outgoing HTTP request; empty when no span is recorded."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier
