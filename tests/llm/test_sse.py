"""The lean SSE reader: the events of a byte stream, however the bytes are cut."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from persona_agent.llm import sse
from persona_agent.llm.sse import Event, EventTooLarge, events

STREAM = (
    b": a comment\n"
    b'data: {"a": 1}\n\n'
    b"event: error\r\ndata: first\r\ndata:second\r\n\r\n"
    b"id: 7\rretry: 10\rdata:  two spaces\r\r"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    Event(b'{"a": 1}'),
    Event(b"first\nsecond", b"error"),
    Event(b" two spaces"),
    Event(b"[DONE]"),
]


async def _chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def _read(parts: list[bytes]) -> list[Event]:
    async def collect() -> list[Event]:
        return [event async for event in events(_chunks(parts))]

    return asyncio.run(collect())


def test_lines_end_with_lf_crlf_or_cr_and_fields_are_read_as_the_standard_says() -> None:
    assert _read([STREAM]) == EXPECTED


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_the_events_are_the_same_wherever_the_bytes_are_cut(cuts: list[int]) -> None:
    points = sorted({0, len(STREAM), *cuts})
    parts = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert _read(parts) == EXPECTED


def test_an_event_not_ended_is_dropped_and_one_without_data_is_skipped() -> None:
    assert _read([b"event: x\n\n", b"data: cut short"]) == []


def test_a_stream_that_never_ends_an_event_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "MAX_EVENT_BYTES", 100)
    with pytest.raises(EventTooLarge):
        _read([b"data: " + b"x" * 60 + b"\n", b"data: " + b"y" * 60 + b"\n"])
