"""What the OpenAI-compatible door answers, in OpenAI's shapes: the model list, a chat
completion, its stream's chunks (server-sent events), and errors
(``{"error": {"message", "type", "code", "param"}}``)."""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.types import Send

from persona_agent.a2a.context_keys import HANDED_DATA_KIND
from persona_agent.a2a.extensions import COST_KIND
from persona_agent.collab.local_calls import LocalEnd

__all__ = [
    "Chunks",
    "completion",
    "error_body",
    "model_entry",
    "send_json",
    "tool_calls_of",
    "usage_of",
]

OWNER = "persona-agent"
"""``owned_by`` of every model: the hub."""
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def model_entry(persona_id: str, created: int = 0) -> dict[str, Any]:
    return {"id": persona_id, "object": "model", "created": created, "owned_by": OWNER}


def error_body(
    message: str, type: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "code": code, "param": param}}


async def send_json(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(body, ensure_ascii=False).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    head += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


def usage_of(end: LocalEnd) -> dict[str, int]:
    """The turn's tokens, from its cost-v1 (a panel's: every member's together)."""
    for data in end.data:
        usage = data.get("usage")
        if data.get("kind") == COST_KIND and isinstance(usage, dict):
            prompt = int(usage.get("promptTokens", 0))
            completion = int(usage.get("completionTokens", 0))
            return {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def tool_calls_of(end: LocalEnd) -> list[dict[str, Any]]:
    """The calls of the caller's own tools the turn ended with, as OpenAI's ``tool_calls``."""
    for data in end.data:
        calls = data.get("calls")
        if data.get("kind") == HANDED_DATA_KIND and isinstance(calls, list):
            return [
                {
                    "id": str(call.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(call.get("name", "")),
                        "arguments": str(call.get("arguments", "")),
                    },
                }
                for call in calls
                if isinstance(call, dict)
            ]
    return []


def completion(completion_id: str, model: str, end: LocalEnd, text: str) -> dict[str, Any]:
    """A non-streamed answer (``chat.completion``)."""
    calls = tool_calls_of(end)
    message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish(end, calls),
                "logprobs": None,
            }
        ],
        "usage": usage_of(end),
        "system_fingerprint": None,
    }


def _finish(end: LocalEnd, calls: list[dict[str, Any]]) -> str:
    """``tool_calls`` (the caller's tools to run), ``length`` (the token cap), or ``stop``."""
    return "tool_calls" if calls else "length" if end.cut else "stop"


class Chunks:
    """A streamed answer's events (``chat.completion.chunk``), written to ``send``: the
    head and a first chunk with the role, a chunk a piece of text, the last chunk with the
    finish reason (and the calls of the caller's tools), the usage chunk when asked
    (``choices: []``), then ``[DONE]``."""

    def __init__(self, send: Send, completion_id: str, model: str, *, include_usage: bool):
        self._send = send
        self._head = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
        }
        if include_usage:
            self._head["usage"] = None
        self._include_usage = include_usage
        self.started = False

    async def start(self) -> None:
        await self._send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        self.started = True
        await self._choice({"role": "assistant", "content": ""})

    async def text(self, text: str) -> None:
        await self._choice({"content": text})

    async def finish(self, end: LocalEnd) -> None:
        calls = tool_calls_of(end)
        if calls:
            indexed = [{"index": index, **call} for index, call in enumerate(calls)]
            await self._choice({"tool_calls": indexed})
        await self._choice({}, _finish(end, calls))
        if self._include_usage:
            await self._event({**self._head, "choices": [], "usage": usage_of(end)})
        await self._done()

    async def fail(self, message: str, type: str, code: str | None = None) -> None:
        """An error after the stream began (as OpenAI sends one mid-stream)."""
        await self._event(error_body(message, type, code))
        await self._done()

    async def _choice(self, delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        await self._event({**self._head, "choices": [choice]})

    async def _event(self, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        await self._send(
            {"type": "http.response.body", "body": b"data: " + data + b"\n\n", "more_body": True}
        )

    async def _done(self) -> None:
        await self._send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
