"""A small, real OTLP trace receiver for the tests, on 127.0.0.1: OTLP/HTTP (``POST /v1/traces``,
protobuf or JSON, served by uvicorn in a thread) or OTLP/gRPC (``TraceService/Export`` on a
grpcio server), recording each span it is sent.

    with OTLPReceiver("grpc") as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        ...
        spans = receiver.wait_for(lambda spans: any(s.name == "llm.call" for s in spans))
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from starlette.types import Receive, Scope, Send

from tests.servers.threaded import ThreadedServer

__all__ = ["OTLPProtocol", "OTLPReceiver", "ReceivedSpan"]

OTLPProtocol = Literal["http", "grpc"]

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver decoded it.

    ``trace_id`` is 32 lowercase hex digits, ``span_id`` 16, ``parent_span_id`` 16 or ``""``
    for a root span; ``kind`` and ``status_code`` are the protobuf enum names
    (``"SPAN_KIND_SERVER"``, ``"STATUS_CODE_ERROR"``); ``attributes`` hold plain values
    (str, int, float, bool, bytes; arrays as lists, key-value lists as dicts);
    ``service_name`` is the ``service.name`` of the span's resource (``""`` without one).
    """

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    attributes: dict[str, object]
    status_code: str
    service_name: str


class OTLPReceiver:
    """An OTLP trace receiver listening on a free port while inside the ``with`` block.

    :attr:`endpoint` is what ``OTEL_EXPORTER_OTLP_ENDPOINT`` should be set to (for either
    protocol); :attr:`spans` is every span received so far, in arrival order.
    """

    def __init__(self, protocol: OTLPProtocol = "http") -> None:
        if protocol not in ("http", "grpc"):
            raise ValueError(f"protocol must be 'http' or 'grpc', not {protocol!r}")
        self.protocol: OTLPProtocol = protocol
        self.port = 0
        self.requests = 0
        """How many export requests have been accepted."""
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self._http: ThreadedServer | None = None
        self._grpc: grpc.Server | None = None

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``: the base URL (OTLP/HTTP adds ``/v1/traces`` to it)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def spans(self) -> list[ReceivedSpan]:
        """A copy of the spans received so far."""
        with self._lock:
            return list(self._spans)

    def clear(self) -> None:
        """Forget the spans received so far."""
        with self._lock:
            self._spans.clear()

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 60.0
    ) -> list[ReceivedSpan]:
        """The spans received, once ``predicate`` holds for them (polled); AssertionError,
        naming the spans received, when it does not within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans
            if predicate(spans):
                return spans
            if time.monotonic() >= deadline:
                names = [span.name for span in spans]
                raise AssertionError(
                    f"OTLP receiver ({self.protocol}): not within {timeout} s; "
                    f"{len(names)} spans received: {names}"
                )
            time.sleep(0.02)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        if self.protocol == "http":
            self._http = ThreadedServer(self._app, "OTLP/HTTP receiver")
            self.port = self._http.start()
        else:
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            add_servicer = trace_service_pb2_grpc.add_TraceServiceServicer_to_server
            add_servicer(_TraceService(self), server)  # type: ignore[no-untyped-call]
            self.port = server.add_insecure_port("127.0.0.1:0")
            if not self.port:
                raise RuntimeError("the OTLP/gRPC receiver could not bind a port")
            server.start()
            self._grpc = server
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._http is not None:
            self._http.stop()
            self._http = None
        if self._grpc is not None:
            self._grpc.stop(grace=None).wait(10)
            self._grpc = None

    # -- receiving ----------------------------------------------------------------------------

    def _record(self, request: ExportTraceServiceRequest) -> None:
        spans = list(_decode(request))
        with self._lock:
            self._spans.extend(spans)
            self.requests += 1

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        if scope["path"] != TRACES_PATH:
            await _send(send, 404, "text/plain", b"not found")
            return
        if scope["method"] != "POST":
            await _send(send, 405, "text/plain", b"method not allowed")
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        try:
            body = _decompress(b"".join(chunks), headers.get("content-encoding", ""))
            if content_type == "application/x-protobuf":
                request = ExportTraceServiceRequest.FromString(body)
            elif content_type == "application/json":
                request = _parse_json(body)
            else:
                await _send(send, 415, "text/plain", b"unsupported content type")
                return
        except (DecodeError, json_format.ParseError, ValueError, OSError, zlib.error) as error:
            await _send(send, 400, "text/plain", f"bad request: {error}".encode())
            return
        self._record(request)
        response = ExportTraceServiceResponse()
        if content_type == "application/json":
            await _send(send, 200, content_type, json_format.MessageToJson(response).encode())
        else:
            await _send(send, 200, content_type, response.SerializeToString())


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OTLPReceiver) -> None:
        self._receiver = receiver

    def Export(
        self, request: ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> ExportTraceServiceResponse:
        self._receiver._record(request)
        return ExportTraceServiceResponse()


async def _send(send: Send, status: int, content_type: str, body: bytes) -> None:
    headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _decompress(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding in ("", "identity"):
        return body
    raise ValueError(f"unsupported content encoding {encoding!r}")


_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _parse_json(body: bytes) -> ExportTraceServiceRequest:
    """OTLP/JSON: protobuf's JSON mapping, except that trace and span ids are hex, not base64."""
    data = json.loads(body or b"{}")

    def ids_to_base64(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _ID_KEYS and isinstance(value, str):
                    node[key] = base64.b64encode(bytes.fromhex(value)).decode()
                else:
                    ids_to_base64(value)
        elif isinstance(node, list):
            for item in node:
                ids_to_base64(item)

    ids_to_base64(data)
    request = ExportTraceServiceRequest()
    json_format.ParseDict(data, request, ignore_unknown_fields=True)
    return request


def _decode(request: ExportTraceServiceRequest) -> Iterable[ReceivedSpan]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service_name = str(resource.get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield ReceivedSpan(
                    name=span.name,
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    kind=Span.SpanKind.Name(span.kind),
                    attributes=_attributes(span.attributes),
                    status_code=Status.StatusCode.Name(span.status.code),
                    service_name=service_name,
                )


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, object]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> object:
    match value.WhichOneof("value"):
        case "string_value":
            return value.string_value
        case "bool_value":
            return value.bool_value
        case "int_value":
            return value.int_value
        case "double_value":
            return value.double_value
        case "bytes_value":
            return value.bytes_value
        case "array_value":
            return [_value(item) for item in value.array_value.values]
        case "kvlist_value":
            return _attributes(value.kvlist_value.values)
        case _:
            return None
