"""v0.3 HTTP+JSON inline file bytes as sent: the SDK base64-decodes them twice on the way in
and encodes them twice on the way out.

a2a-sdk 1.3 parses a v0.3 send into its v0.3 protobuf (which decodes the base64), then
takes those bytes as the base64 text of its v0.3 model and decodes them again: a file
failed with a 5xx. A stored file comes back base64 of base64 in a task's history. The
send routes get the bytes encoded once more (:func:`v03_file_bytes_in`); the answers of
the routes that carry messages, JSON or an event stream, are decoded once
(:func:`v03_file_bytes_out`). ``tests/a2a/test_sdk_fixes.py`` fails the day the SDK
changes.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from persona_agent.security.ingress.body_limits import replay

__all__ = ["v03_file_bytes_in", "v03_file_bytes_out"]

Endpoint = Callable[[Request], Awaitable[Response]]


def v03_file_bytes_in(sdk_endpoint: Callable[..., Any]) -> Endpoint:
    """``sdk_endpoint`` (v0.3 send or stream), given its inline files' base64 encoded once
    more, which its double decoding takes back to the bytes sent."""

    async def endpoint(request: Request) -> Response:
        fixed = _encode_file_bytes_again(await request.body())
        if fixed is not None:
            request = Request(request.scope, replay(fixed, request.receive))
        response: Response = await sdk_endpoint(request)
        return response

    return endpoint


def _encode_file_bytes_again(body: bytes) -> bytes | None:
    """The v0.3 send body with every inline file's base64 encoded once more, or None.

    The SDK parses the body into its v0.3 protobuf (which decodes the base64),
    then takes those bytes as the base64 text of its v0.3 model and decodes
    them again. Encoded twice, they arrive as sent.
    """
    try:
        document = json.loads(body)
        parts = document["message"]["content"]
    except (ValueError, KeyError, TypeError):
        return None  # the SDK answers what is wrong with it
    changed = False
    for part in parts if isinstance(parts, list) else ():
        file = part.get("file") if isinstance(part, dict) else None
        if not isinstance(file, dict):
            continue
        for key in ("fileWithBytes", "file_with_bytes"):
            value = file.get(key)
            raw = _base64_decoded(value) if isinstance(value, str) else None
            if raw is not None:
                file[key] = base64.b64encode(base64.b64encode(raw)).decode("ascii")
                changed = True
    return json.dumps(document).encode() if changed else None


def v03_file_bytes_out(app: ASGIApp) -> ASGIApp:
    """``app`` with every inline file in its JSON or event-stream answer decoded once.

    The SDK's v0.3 conversion turns a stored file into base64 text, then
    serializes that text as protobuf bytes: base64 of base64.
    """

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        start: Message | None = None
        held: list[bytes] = []

        async def fixing_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                if content_type.startswith(b"text/event-stream"):
                    await send(message)  # each event is fixed as it goes
                else:
                    start = message  # sent with the fixed body, its length changed
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            body = message.get("body", b"")
            if start is None:
                await send({**message, "body": _decode_event_stream_files(body)})
                return
            held.append(body)
            if message.get("more_body", False):
                return
            fixed = _decode_json_files(b"".join(held))
            headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            headers.append((b"content-length", str(len(fixed)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": fixed})

        await app(scope, receive, fixing_send)

    return answer


def _decode_json_files(body: bytes) -> bytes:
    try:
        document = json.loads(body)
    except ValueError:
        return body
    return json.dumps(document).encode() if _decode_files(document) else body


def _decode_event_stream_files(chunk: bytes) -> bytes:
    lines = chunk.split(b"\n")
    changed = False
    for index, line in enumerate(lines):
        if line.startswith(b"data:"):
            fixed = _decode_json_files(line[5:].strip())
            if fixed != line[5:].strip():
                lines[index] = b"data: " + fixed
                changed = True
    return b"\n".join(lines) if changed else chunk


def _decode_files(value: Any) -> bool:
    """Decode, in place, the base64 of every ``fileWithBytes`` in ``value``; whether any."""
    changed = False
    if isinstance(value, dict):
        inner = value.get("fileWithBytes")
        if isinstance(inner, str):
            text = _base64_decoded(inner)
            if text is not None and text.isascii():
                value["fileWithBytes"] = text.decode("ascii")
                changed = True
        for item in value.values():
            changed = _decode_files(item) or changed
    elif isinstance(value, list):
        for item in value:
            changed = _decode_files(item) or changed
    return changed


def _base64_decoded(value: str) -> bytes | None:
    """``value`` decoded as protobuf's JSON reads bytes (standard or URL-safe base64)."""
    padded = value + "=" * (-len(value) % 4)
    for altchars in (None, b"-_"):
        try:
            return base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
    return None
