"""v0.3 HTTP+JSON requests the SDK refuses too late or not at all: refused first, with 400.

- ``POST /v1/message:stream``: the SDK starts the event stream (``200``), then parses
  the body and calls the handler inside it; whatever they refuse (a body that does not
  parse, ``{"message": 5}``; a message no task can start from; an unknown task) raised
  there, and the client saw the connection cut mid-stream. ``/v1/message:send`` answers
  the same requests with their ``4xx``; so does the stream now: its first event is
  awaited before the answer starts.
- ``GET /v1/tasks/{id}``: the SDK reads ``historyLength`` with ``int(...)`` and hands it
  to an int32: ``?historyLength=x``, or a number past 2**31, raised ``ValueError``, which
  the SDK's REST error handler answered ``500`` "unknown exception". The 1.0 route
  refuses both with Invalid params; so does this one.

Canaries: ``tests/a2a/test_sdk_fixes.py::test_sdk_v03_rest_cuts_a_stream_it_refuses``
and ``::test_sdk_v03_rest_answers_a_bad_history_length_with_a_500``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing

from a2a.utils.error_handlers import rest_error_handler
from a2a.utils.errors import InvalidParamsError
from starlette.requests import Request
from starlette.responses import Response

__all__ = [
    "V03_GET_TASK",
    "checked_history_length",
    "checked_stream_start",
    "history_length_error",
]

V03_GET_TASK = "/v1/tasks/{id}"
_INT32_MAX = 2**31 - 1

Endpoint = Callable[[Request], Awaitable[Response]]


def history_length_error(raw: str | None) -> InvalidParamsError | None:
    """Invalid params when ``raw`` (the query's ``historyLength``) is given and is not a
    whole number an int32 holds; else None (the SDK's own checks go on)."""
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is not None and abs(value) <= _INT32_MAX:
        return None
    return InvalidParamsError(
        message=f"historyLength must be a whole number up to {_INT32_MAX}, not {raw[:40]!r}"
    )


def checked_history_length(sdk_endpoint: Endpoint) -> Endpoint:
    """``sdk_endpoint`` (v0.3 get task), refusing a bad ``historyLength`` first."""

    @rest_error_handler
    async def endpoint(request: Request) -> Response:
        error = history_length_error(request.query_params.get("historyLength"))
        if error is not None:
            raise error
        return await sdk_endpoint(request)

    return endpoint


def checked_stream_start(sdk_endpoint: Endpoint) -> Endpoint:
    """``sdk_endpoint`` (v0.3 message stream), its first event awaited before the answer
    starts: an error before it is the JSON error ``message:send`` gives, not a cut stream."""

    @rest_error_handler
    async def endpoint(request: Request) -> Response:
        response = await sdk_endpoint(request)
        events = getattr(response, "body_iterator", None)
        if not isinstance(events, AsyncGenerator):
            return response  # an error answer already
        try:
            first = await anext(events)
        except StopAsyncIteration:
            return response
        response.body_iterator = _prepended(first, events)  # type: ignore[attr-defined]
        return response

    return endpoint


async def _prepended(first: object, rest: AsyncGenerator[object]) -> AsyncGenerator[object]:
    yield first
    async with aclosing(rest):
        async for item in rest:
            yield item
