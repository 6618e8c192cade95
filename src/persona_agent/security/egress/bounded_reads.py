"""Reading what another server sends, bounded: a streamed body cut at a byte limit (the rest
is never read), and JSON refused past a nesting depth.

A document fetched from elsewhere (an AI Catalog, an agent's card) is untrusted input: a
318 MB catalog took a hub past 7 GB of memory when its body was buffered whole and parsed,
and a 0.2 MB one of nested brackets raised ``RecursionError``. Here the body is read chunk by
chunk and the connection closed as soon as it passes ``max_bytes``; a ``Content-Length``
over the limit is refused before any of the body is read, and a compressed body (which the
request does not ask for) at once. orjson parses in C with a depth
limit of its own (1024: it refuses, never recurses without end), and the value is then
walked without recursion to hold it to ``max_depth``, before any code that recurses (the
protobuf parser, canonical JSON) sees it.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from persona_agent.security.limits import nests_deeper

__all__ = ["IDENTITY", "ReadRefused", "check_nesting", "parse_json", "read_capped"]

IDENTITY = {"Accept-Encoding": "identity"}
"""The header a bounded read's request carries: the body as it is, never compressed."""


class ReadRefused(ValueError):
    """A body or document over a limit (or no JSON); the message says which.
    ``limit``: ``bytes`` or ``depth`` when it is over that limit."""

    def __init__(self, message: str, limit: str | None = None) -> None:
        super().__init__(message)
        self.limit = limit


async def read_capped(response: httpx.Response, max_bytes: int) -> bytes:
    """The body of a streamed ``response``, at most ``max_bytes`` of it.

    Raises:
        ReadRefused: its ``Content-Length`` says more, or more came (the rest is not read:
            the caller's ``async with`` closes the response, and with it the connection).
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise ReadRefused(
            f"it has {int(declared):,} bytes, more than the limit of {max_bytes:,}", "bytes"
        )
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        # A compressed body could expand past any limit once decoded: the request asks
        # for none (IDENTITY), which every server may give.
        raise ReadRefused(f"it came compressed ({encoding}), though the request asked for none")
    body = bytearray()
    async for chunk in response.aiter_bytes():  # not decoded: it is not compressed
        body += chunk
        if len(body) > max_bytes:
            raise ReadRefused(f"it has more than {max_bytes:,} bytes, the limit", "bytes")
    return bytes(body)


def check_nesting(value: Any, max_depth: int) -> None:
    """Raise :class:`ReadRefused` if lists and objects nest deeper than ``max_depth``
    (walked without recursion)."""
    if nests_deeper(value, max_depth):
        raise ReadRefused(f"its lists and objects nest more than {max_depth} deep", "depth")


def parse_json(body: bytes, max_depth: int) -> Any:
    """The JSON value of ``body``, held to ``max_depth``.

    Raises:
        ReadRefused: not JSON (orjson's reason), or nested too deep.
    """
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        if "depth" in str(error):
            raise ReadRefused(
                f"its lists and objects nest more than {max_depth} deep", "depth"
            ) from None
        raise ReadRefused(f"it is not JSON ({error})") from None
    check_nesting(value, max_depth)
    return value
