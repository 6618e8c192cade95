"""Requests of the fuzz suite, each answered in full within a deadline, streams included."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tests.fuzz.budget import DEADLINE

__all__ = ["MAX_ANSWER_BYTES", "Answer", "json_events", "send"]

MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""An answer longer than this is a failure (no fuzz case asks for anything near it)."""


@dataclass
class Answer:
    status: int
    headers: httpx.Headers
    body: bytes
    seconds: float

    @property
    def media_type(self) -> str:
        content_type: str = self.headers.get("content-type", "")
        return content_type.split(";")[0].strip().lower()

    def json(self) -> Any:
        return json.loads(self.body)

    def shown(self) -> str:
        """The answer for a failure message: status, media type and the body's start."""
        return f"{self.status} {self.media_type}: {self.body[:500]!r}"


def send(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
    deadline: float = DEADLINE,
) -> Answer:
    """Send one request and read its whole answer (an event stream to its end).

    Raises:
        AssertionError: the answer, or its end, did not come within ``deadline`` seconds
            (a hang), or it grew past :data:`MAX_ANSWER_BYTES`.
    """
    start = time.monotonic()
    chunks: list[bytes] = []
    size = 0
    try:
        with client.stream(
            method,
            url,
            content=content,
            headers=headers,
            timeout=httpx.Timeout(deadline),
        ) as response:
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                assert size <= MAX_ANSWER_BYTES, f"{method} {url}: the answer passed {size} bytes"
                _within(start, deadline, method, url)
            status, answer_headers = response.status_code, response.headers
    except httpx.TimeoutException:
        raise AssertionError(
            f"{method} {url}: no complete answer within {deadline} s (a hang)"
        ) from None
    _within(start, deadline, method, url)
    return Answer(status, answer_headers, b"".join(chunks), time.monotonic() - start)


def _within(start: float, deadline: float, method: str, url: str) -> None:
    elapsed = time.monotonic() - start
    assert elapsed <= deadline, f"{method} {url}: still answering after {elapsed:.1f} s (a hang)"


def json_events(body: bytes) -> list[Any]:
    """The JSON data of each event of a ``text/event-stream`` body (comments skipped).

    Raises:
        AssertionError: an event's data is not JSON.
    """
    events: list[Any] = []
    for block in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = [
            line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")
        ]
        if data:
            text = "\n".join(data)
            try:
                events.append(json.loads(text))
            except ValueError:
                raise AssertionError(f"an event's data is not JSON: {text[:300]!r}") from None
    return events
