"""The cost-v1 counts as JSON integers on the wire (``12``, not ``12.0``).

A DataPart is a protobuf ``Struct``, whose numbers are doubles: there is no integer
in it to keep. a2a-sdk writes its JSON answers from ``MessageToDict``, which gives
every such number as a Python ``float``, and ``json.dumps`` writes those as ``12.0``.
JSON has one kind of number, so ``12`` is the same value; but a client reading the
counts (tokens, model and tool calls, milliseconds) as integers, as the extension
documents them, should not have to round them. The hub rewrites those fields of
every cost-v1 object in its JSON answers and event streams (a body or an event
without ``"cost-v1"`` in it passes untouched, unread), and in its push
notifications' bodies.

Canary: ``tests/a2a/test_sdk_fixes.py::test_sdk_writes_a_data_parts_whole_numbers_as_floats``.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Message, Send

from persona_agent.a2a.extensions import COST_KIND, integral_counts

__all__ = ["counts_as_integers", "whole_counts"]

_MARK = f'"{COST_KIND}"'.encode()


def counts_as_integers(document: Any) -> bool:
    """Make, in place, the counts of every cost-v1 object in ``document`` integers;
    whether any changed."""
    changed = False
    if isinstance(document, dict):
        if document.get("kind") == COST_KIND:
            changed = integral_counts(document)
        for value in document.values():
            changed = counts_as_integers(value) or changed
    elif isinstance(document, list):
        for item in document:
            changed = counts_as_integers(item) or changed
    return changed


def whole_counts(send: Send) -> Send:
    """``send`` of an A2A answer, with the cost-v1 counts of its JSON (a whole body, or
    each event of an event stream) written as integers."""
    start: Message | None = None
    held: list[bytes] = []

    async def sending(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            content_type = dict(message.get("headers", [])).get(b"content-type", b"")
            if b"json" in content_type:
                start = message  # sent with the body, whose length may change
            else:
                await send(message)
            return
        if message["type"] != "http.response.body":
            await send(message)
            return
        body: bytes = message.get("body", b"")
        if start is None:  # an event stream: each event as it goes
            if _MARK in body:
                message = {**message, "body": _fixed_events(body)}
            await send(message)
            return
        held.append(body)
        if message.get("more_body", False):
            return
        whole = b"".join(held)
        fixed = _fixed_json(whole) if _MARK in whole else whole
        headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(fixed)).encode()))
        await send({**start, "headers": headers})
        await send({**message, "body": fixed})

    return sending


def _fixed_json(body: bytes) -> bytes:
    try:
        document = json.loads(body)
    except ValueError:
        return body
    if not counts_as_integers(document):
        return body
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def _fixed_events(chunk: bytes) -> bytes:
    """An event-stream chunk with each ``data:`` line's JSON fixed."""
    lines = chunk.split(b"\n")
    for index, line in enumerate(lines):
        if line.startswith(b"data:") and _MARK in line:
            ending = b"\r" if line.endswith(b"\r") else b""
            data = line[5:].strip()
            fixed = _fixed_json(data)
            if fixed is not data:
                lines[index] = b"data: " + fixed + ending
    return b"\n".join(lines)
