"""Server-sent events read from a byte stream, lean: each event's data as bytes, nothing more.

The ``openai`` backend reads a chat-completion stream through this instead of the client's
``AsyncStream``, which builds a pydantic model of every chunk (about half a millisecond of
CPU per streamed token on two cores, issue 34); the client still makes the request (its
configuration, headers, retries, errors and timeouts). The format is the HTML standard's
(``text/event-stream``): lines end with LF, CR LF or CR; ``data:`` lines of one event are
joined with LF; a blank line ends the event; ``:`` lines are comments; an ``event:`` line
names the event.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["MAX_EVENT_BYTES", "Event", "EventTooLarge", "events"]

MAX_EVENT_BYTES = 16 * 1024 * 1024
"""Longest event taken (a tool call's arguments come in many small events)."""


class EventTooLarge(ValueError):
    """An event longer than :data:`MAX_EVENT_BYTES`: a server that sends no event end."""


@dataclass(frozen=True, slots=True)
class Event:
    data: bytes
    name: bytes = b""
    """The ``event:`` field; empty for the default (``message``)."""


async def events(chunks: AsyncIterable[bytes]) -> AsyncIterator[Event]:
    """Each event of the stream whose bytes come in ``chunks``, in order; an event with no
    data is skipped, as the standard says. A last event not ended by a blank line is
    dropped (a stream cut short).

    Raises:
        EventTooLarge: more than :data:`MAX_EVENT_BYTES` without an event's end.
    """
    buffer = b""
    data: list[bytes] = []
    name = b""
    async for chunk in chunks:
        buffer = buffer + chunk if buffer else chunk
        if b"\r" in buffer:
            # CR LF and a lone CR end lines too; a CR last may be half of a CR LF.
            keep_cr = buffer.endswith(b"\r")
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if keep_cr:
                buffer = buffer[:-1] + b"\r"
        start = 0
        while (end := buffer.find(b"\n", start)) >= 0:
            line = buffer[start:end]
            start = end + 1
            if not line:
                if data:
                    yield Event(b"\n".join(data), name)
                data, name = [], b""
                continue
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                name = value
            # ":" comments, "id", "retry" and unknown fields are ignored
        buffer = buffer[start:]
        if len(buffer) + sum(map(len, data)) > MAX_EVENT_BYTES:
            raise EventTooLarge(f"a stream event of more than {MAX_EVENT_BYTES} bytes")
