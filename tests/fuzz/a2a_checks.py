"""What every A2A answer must be, whatever was asked: checks shared by the A2A fuzzers."""

from __future__ import annotations

from typing import Any

from tests.fuzz.wire import Answer, json_events

__all__ = [
    "A2A_CODES",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SPEC_CODES",
    "VERSION_NOT_SUPPORTED",
    "check_http_json_answer",
    "check_jsonrpc_answer",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
VERSION_NOT_SUPPORTED = -32009
A2A_CODES = frozenset(range(-32009, -32000))
"""A2A's own: TaskNotFound -32001 ... VersionNotSupported -32009."""
SPEC_CODES = frozenset({PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS}) | A2A_CODES
"""Every code a request may get: never -32603 (internal error) for what a client sent."""


def check_jsonrpc_answer(
    answer: Answer, request_id: Any = ..., codes: set[int] | None = None
) -> None:
    """A JSON-RPC answer (one object, or an event stream of them) as the specification
    has it: ``jsonrpc`` ``2.0``, ``result`` or ``error`` (a spec code and a message).

    ``request_id``: the id the answer must carry (``...``: not checked); ``codes``: the
    errors the answer may be (``None``: any spec code, or a result).
    """
    assert answer.status < 500, answer.shown()
    if answer.media_type == "text/event-stream":
        assert answer.status == 200, answer.shown()
        events = json_events(answer.body)
        assert events, f"an event stream with no event: {answer.shown()}"
        assert codes is None, f"expected error {codes}, got a stream: {answer.shown()}"
        for event in events:
            _check_response(event, answer, request_id, None)
        return
    assert answer.media_type == "application/json", answer.shown()
    _check_response(answer.json(), answer, request_id, codes)


def _check_response(body: Any, answer: Answer, request_id: Any, codes: set[int] | None) -> None:
    assert isinstance(body, dict), answer.shown()
    assert body.get("jsonrpc") == "2.0", answer.shown()
    assert ("result" in body) != ("error" in body), answer.shown()
    if request_id is not ...:
        assert body.get("id") == request_id, f"id {request_id!r} not echoed: {answer.shown()}"
    if "error" not in body:
        assert codes is None, f"expected error {codes}, got a result: {answer.shown()}"
        return
    error = body["error"]
    assert isinstance(error, dict), answer.shown()
    assert error.get("code") in SPEC_CODES, f"not a code of the spec: {answer.shown()}"
    assert isinstance(error.get("message"), str), answer.shown()
    assert error["message"], answer.shown()
    if codes is not None:
        assert error["code"] in codes, f"expected error {codes}: {answer.shown()}"


def check_http_json_answer(answer: Answer) -> None:
    """An HTTP+JSON answer: no 5xx; an error is JSON naming what went wrong; a stream is
    events of JSON data, ended within the deadline (``send`` checked that)."""
    assert answer.status < 500, answer.shown()
    if answer.media_type == "text/event-stream":
        assert answer.status == 200, answer.shown()
        for event in json_events(answer.body):
            assert isinstance(event, dict), answer.shown()
        return
    if answer.status in (204, 304) or not answer.body:
        return
    if answer.status in (404, 405) and answer.media_type == "text/plain":
        return  # a path or method no route has: the framework's own answer
    assert answer.media_type in ("application/json", "application/a2a+json"), answer.shown()
    body = answer.json()
    assert isinstance(body, dict), answer.shown()
    if answer.status >= 400:
        error = body.get("error")
        assert isinstance(error, dict) or "detail" in body, answer.shown()
        if isinstance(error, dict):
            assert isinstance(error.get("message"), str), answer.shown()
            assert error["message"], answer.shown()
