"""Request heads bounded: at most so many bytes and so many header fields, else 431.

Neither of uvicorn's HTTP parsers bounds a request's head on its own terms: httptools
(llhttp) keeps a header's value growing for as long as it comes, and h11 refuses only a
head still incomplete past 16 KiB, with a 400. One 50 MB header was read, held and
answered 200, before any authentication. The protocol class
:func:`bounded_head_protocol` makes is uvicorn's own (httptools when it is installed, as
uvicorn picks it, else h11) counting a head's bytes (its request line included) and
header fields as they come: past either limit the client gets **431 Request Header Fields
Too Large**, naming the limit and its setting, and the connection is closed, before the
hub has read much more than the limit (one read of the socket: 256 KiB at most).

How each parser is bounded:

- **h11** buffers a head until it is complete: the buffer is bounded by h11's own
  ``max_incomplete_event_size`` (set to the limit), and a head that came whole in one read
  is measured when h11 gives it.
- **httptools** hands over a URL piece by piece and a header only once it is whole: the
  bytes of a head still incomplete are counted as they are received, and a head's URL
  and headers as the parser gives them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

__all__ = ["bounded_head_protocol", "uvicorn_protocol"]

logger = logging.getLogger(__name__)

_HEAD_OVERHEAD = len(b"  HTTP/1.1\r\n\r\n")
"""The request line's spaces and version, and the blank line that ends a head."""
_FIELD_OVERHEAD = len(b": \r\n")


def uvicorn_protocol() -> type[asyncio.Protocol]:
    """The HTTP protocol uvicorn picks by default (``--http auto``): httptools' when it is
    installed (uvicorn[standard]), else h11's."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    return HttpToolsProtocol


def bounded_head_protocol(
    *, max_bytes: int, max_headers: int, base: type[asyncio.Protocol] | None = None
) -> type[asyncio.Protocol]:
    """``base`` (default :func:`uvicorn_protocol`; h11's or httptools' protocol of
    uvicorn, or a subclass), refusing with 431 a request head of more than ``max_bytes``
    bytes or ``max_headers`` header fields."""
    chosen = base if base is not None else uvicorn_protocol()
    limits = _Limits(max_bytes, max_headers)
    if _on_httptools(chosen):
        return _bounded_httptools(chosen, limits)
    return _bounded_h11(chosen, limits)


def _on_httptools(protocol: type[asyncio.Protocol]) -> bool:
    """Whether ``protocol`` is uvicorn's httptools protocol (or a subclass), else h11's.
    Asked this way so that h11, and uvicorn's protocol on it, are imported only when h11 is
    the parser: a hub on httptools (uvicorn's default when installed) never loads them."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed: h11 it is
        return False
    return issubclass(protocol, HttpToolsProtocol)


class _Limits:
    def __init__(self, max_bytes: int, max_headers: int) -> None:
        self.max_bytes = max_bytes
        self.max_headers = max_headers

    def too_large(self) -> str:
        return (
            f"The request head (request line and headers) is larger than the limit of "
            f"{self.max_bytes} bytes (PERSONA_AGENT_MAX_HEAD_BYTES)"
        )

    def too_many(self) -> str:
        return (
            f"The request head has more than {self.max_headers} header fields "
            "(PERSONA_AGENT_MAX_HEADERS)"
        )


class _Refused(Exception):
    """Raised in a parser's callback to stop it: the head is over a limit."""


def _refuse(protocol: Any, reason: str) -> None:
    """Answer 431 with ``reason`` and close the connection (nothing was answered on it
    for this request: its head never reached the app)."""
    if protocol.transport.is_closing():
        return
    client = "{}:{}".format(*protocol.client) if protocol.client else "a client"
    logger.info("Refused the request of %s: %s", client, reason)
    body = json.dumps({"detail": reason}).encode()
    head = [b"HTTP/1.1 431 Request Header Fields Too Large\r\n"]
    for name, value in protocol.server_state.default_headers:  # date, server
        head.append(b"%s: %s\r\n" % (name, value))
    head.append(b"content-type: application/json\r\n")
    head.append(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    protocol.transport.write(b"".join(head) + body)
    protocol.transport.close()


def _refuse_in_turn(protocol: Any, reason: str) -> None:
    """Answer 431 now, or after the answers to the requests that came before it on
    ``protocol``'s connection (HTTP/1.1 answers in order); nothing more is read meanwhile."""
    if _answering(protocol):
        protocol.flow.pause_reading()
    else:
        _refuse(protocol, reason)


def _answering(protocol: Any) -> bool:
    """Whether an earlier request of ``protocol``'s connection (httptools') still awaits its
    answer."""
    cycle = protocol.cycle  # the last request parsed: the refused one never is one
    return bool(protocol.pipeline) or (cycle is not None and not cycle.response_complete)


def _bounded_httptools(base: type[Any], limits: _Limits) -> type[asyncio.Protocol]:
    class BoundedHeadHttpTools(base):  # type: ignore[misc]
        _reading_head = True
        """Between requests or in a head; false from a head's end to its message's end."""
        _heads = 0
        """Heads completed on this connection: a read that completes one is not counted
        as a part of the next."""
        _received = 0
        """Bytes received of the head being read, while it is incomplete."""
        _parsed = 0
        """Bytes of the head being read that the parser has handed over."""
        _fields = 0
        _refusal: str | None = None

        def data_received(self, data: bytes) -> None:
            if self._refusal is not None:
                return  # refused: what follows is not read (the answer may wait, below)
            counting, heads = self._reading_head, self._heads
            super().data_received(data)
            if self._refusal is None and counting and self._reading_head and self._heads == heads:
                # The whole read went to a head that is still incomplete.
                self._received += len(data)
                if self._received > limits.max_bytes:
                    self._refusal = limits.too_large()
                    _refuse_in_turn(self, self._refusal)

        def send_400_response(self, msg: str) -> None:
            # uvicorn's answer to the parser's error, which a callback raised (_Refused).
            if self._refusal is not None:
                _refuse_in_turn(self, self._refusal)
            else:
                super().send_400_response(msg)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._refusal is not None and not _answering(self):
                _refuse(self, self._refusal)

        def on_message_begin(self) -> None:
            self._parsed, self._fields = 0, 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._fields += 1
            if self._fields > limits.max_headers:
                self._stop(limits.too_many())
            self._count(len(name) + len(value) + _FIELD_OVERHEAD)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._count(len(self.parser.get_method()) + _HEAD_OVERHEAD)
            self._reading_head, self._received = False, 0
            self._heads += 1
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._reading_head = True
            super().on_message_complete()

        def _count(self, size: int) -> None:
            self._parsed += size
            if self._parsed > limits.max_bytes:
                self._stop(limits.too_large())

        def _stop(self, reason: str) -> None:
            self._refusal = reason
            raise _Refused(reason)

    return BoundedHeadHttpTools


def _bounded_h11(base: type[Any], limits: _Limits) -> type[asyncio.Protocol]:
    import h11

    class _BoundedConnection(h11.Connection):
        """h11's server side, whose heads are bounded: an incomplete one by h11's buffer
        limit, a complete one measured. Over a limit, ``refusal`` says why and h11's error
        (which uvicorn answers with its 400) is raised."""

        def __init__(self, limits: _Limits) -> None:
            super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_bytes)
            self.limits = limits
            self.refusal: str | None = None

        def next_event(self) -> Any:
            try:
                event = super().next_event()
            except h11.RemoteProtocolError as error:
                if error.error_status_hint == 431:  # its receive buffer is over the limit
                    self.refusal = self.limits.too_large()
                raise
            if isinstance(event, h11.Request):
                fields = event.headers.raw_items()
                size = len(event.method) + len(event.target) + _HEAD_OVERHEAD
                size += sum(len(name) + len(value) + _FIELD_OVERHEAD for name, value in fields)
                if len(fields) > self.limits.max_headers:
                    self.refusal = self.limits.too_many()
                elif size > self.limits.max_bytes:
                    self.refusal = self.limits.too_large()
                if self.refusal is not None:
                    raise h11.RemoteProtocolError(self.refusal, error_status_hint=431)
            return event

    class BoundedHeadH11(base):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.conn = _BoundedConnection(limits)

        def send_400_response(self, msg: str) -> None:
            refusal = self.conn.refusal
            if refusal is not None:
                _refuse(self, refusal)
            else:
                super().send_400_response(msg)

    return BoundedHeadH11
