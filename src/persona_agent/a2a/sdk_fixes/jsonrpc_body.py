"""A JSON-RPC body, read and checked before the SDK sees it.

The SDK's dispatcher answers a body that is not JSON with the spec's Parse
error only when ``json.loads`` raises ``JSONDecodeError``; bytes that look like
UTF-16/32 (``UnicodeDecodeError``) or nesting too deep to parse
(``RecursionError``) come back as -32603 Internal error, with the exception's
text. Reading the body here first (it is bounded by the message size limit)
turns every unparseable body into -32700, then hands the same bytes on.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import Message, Receive

__all__ = [
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "MessageTooLargeError",
    "jsonrpc_error",
    "parse_body",
    "read_body",
    "replay",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def jsonrpc_error(code: int, message: str) -> JSONResponse:
    """A JSON-RPC error answer with no id (the request's could not be read)."""
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


class MessageTooLargeError(Exception):
    """A request body outgrew the size limit while it was read."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def parse_body(body: bytes) -> tuple[Any, str | None]:
    """``body`` parsed as JSON, or why it is not JSON."""
    try:
        return json.loads(body), None
    except json.JSONDecodeError as error:
        return None, f"Parse error: {error.msg} at line {error.lineno}, column {error.colno}"
    except ValueError:  # bytes that are not UTF-8/16/32 text
        return None, "Parse error: the body is not UTF-8 JSON text"
    except RecursionError:
        return None, "Parse error: the JSON is nested too deeply"


async def read_body(receive: Receive) -> bytes:
    """The whole request body (``receive`` enforces the size limit)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: what was read is all there is
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` again, then what the client sends next (a disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
