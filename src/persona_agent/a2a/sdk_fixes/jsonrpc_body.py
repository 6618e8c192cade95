"""A JSON-RPC body, read and checked before the SDK sees it.

The SDK's dispatcher answers a body that is not JSON with the spec's Parse
error only when ``json.loads`` raises ``JSONDecodeError``; bytes that look like
UTF-16/32 (``UnicodeDecodeError``) or nesting too deep to parse
(``RecursionError``) come back as -32603 Internal error, with the exception's
text. Reading the body here first (it is bounded by the message size limit)
turns every unparseable body into -32700, then hands the same bytes on. JSON
text is UTF-8 (RFC 8259 8.1; a byte order mark is ignored): other encodings are
refused rather than guessed.

Two things ``json.loads`` takes are not JSON text either, and are -32700 too:
``NaN`` and ``Infinity`` (RFC 8259 has no such numbers; ``1e400``, which a double
cannot hold, would become one), and an escaped lone surrogate (``"\\ud800"``, half
of a UTF-16 pair: no Unicode character). The SDK echoed a lone surrogate back (an
id, a task's message) into an answer that cannot be written as UTF-8: a 500, or an
event stream cut short.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn

from starlette.responses import JSONResponse
from starlette.types import Receive

__all__ = [
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "MessageTooLargeError",
    "jsonrpc_error",
    "parse_body",
    "read_body",
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


class _NotJsonError(ValueError):
    """A value ``json.loads`` reads and JSON has not."""


def _refuse_constant(name: str) -> NoReturn:
    raise _NotJsonError(f"Parse error: {name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise _NotJsonError(f"Parse error: the number {text[:40]} is out of range")
    return number


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""The escape of a UTF-16 surrogate (paired or not): only then are strings searched."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_body(body: bytes) -> tuple[Any, str | None]:
    """``body`` parsed as JSON, or why it is not JSON."""
    try:
        # UTF-8 (RFC 8259 8.1), strictly: json.loads would take the bytes of a surrogate.
        text = body.decode("utf-8").removeprefix("\ufeff")
        parsed = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except json.JSONDecodeError as error:
        return None, f"Parse error: {error.msg} at line {error.lineno}, column {error.colno}"
    except _NotJsonError as error:
        return None, str(error)
    except ValueError:  # bytes that are not UTF-8 text
        return None, "Parse error: the body is not UTF-8 JSON text"
    except RecursionError:
        return None, "Parse error: the JSON is nested too deeply"
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(parsed):
        return None, (
            "Parse error: a string holds a lone surrogate (an escape such as \\ud800 "
            "without its pair), which is no Unicode character"
        )
    return parsed, None


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a string of ``value`` (keys included) holds half a surrogate pair (``json``
    joins the escapes of a whole pair into one character). Iterative: ``value`` may be
    nested as deep as ``json`` could read."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


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
