"""An instant, deterministic OpenAI-compatible chat-completions server for benchmarks.

The "LLM" answers at once (or with a fixed delay before each token), so whatever
latency and CPU remain belong to the server in front of it. Plain ASGI, served by
uvicorn (uvloop and httptools when installed), standard library otherwise.

    python bench/fake_llm.py --port 9100 [--tokens 20] [--token-delay-ms 20] \
        [--timing-file /tmp/llm-timing.tsv]

Endpoints:
  POST /v1/chat/completions  JSON, or SSE chunks when ``stream`` is true; with
                             ``stream_options.include_usage`` a final usage chunk
                             with ``choices: []``, then ``data: [DONE]``
  GET  /v1/models            one model, ``fake-llm``
  GET  /health               ``{"status": "ok", "requests": N}``

Reply: the first ``--tokens`` words of a fixed sentence that starts with
``Hello from the fake LLM.`` (one word a token). With no delay, a streamed
answer is written in one piece (every chunk in one body write: the cheapest
fake); with a delay, each token is written on its own after the delay.

Timing: when ``--timing-file`` is given and the last user message contains
``[[bench:ID]]``, one line ``ID<TAB>first<TAB>last<TAB>tokens`` is appended per
streamed answer: ``time.monotonic()`` just before the first and the last content
token were written to the socket. ``time.monotonic()`` is CLOCK_MONOTONIC, one
clock for every process of the machine, so a client can compare its own
timestamps with these.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import IO, Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MODEL = "fake-llm"
_WORDS = [
    "Hello",
    "from",
    "the",
    "fake",
    "LLM.",
    "This",
    "is",
    "a",
    "deterministic",
    "reply",
    "used",
    "to",
    "measure",
    "the",
    "overhead",
    "of",
    "the",
    "agent",
    "hub,",
    "not",
    "the",
    "quality",
    "of",
    "any",
    "model.",
]
_MARKER = re.compile(r"\[\[bench:([A-Za-z0-9_.-]+)\]\]")
_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class FakeLLM:
    """The ASGI app. ``tokens`` words a reply, ``delay`` seconds before each token."""

    def __init__(self, tokens: int = 20, delay: float = 0.0, timing: IO[str] | None = None):
        words = itertools.cycle(_WORDS)
        self.tokens = [w if i == 0 else " " + w for i, w in zip(range(tokens), words, strict=False)]
        self.reply = "".join(self.tokens)
        self.delay = delay
        self.timing = timing
        self.requests = 0
        self._ids = itertools.count(1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path = scope["path"].rstrip("/")
        if scope["method"] == "POST" and path.endswith("/chat/completions"):
            await self._chat(receive, send)
        elif path.endswith("/models"):
            models = {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0}]}
            await _json(send, 200, models)
        elif path == "/health":
            await _json(send, 200, {"status": "ok", "requests": self.requests})
        else:
            await _json(send, 404, {"error": {"message": "not found", "type": "not_found"}})

    async def _chat(self, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            request = json.loads(body)
            messages = request.get("messages") or []
        except (ValueError, AttributeError):
            await _json(send, 400, {"error": {"message": "bad JSON", "type": "invalid_request"}})
            return
        self.requests += 1
        number = next(self._ids)
        prompt = sum(len(_text(m.get("content")).split()) for m in messages if isinstance(m, dict))
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": len(self.tokens),
            "total_tokens": prompt + len(self.tokens),
        }
        model = request.get("model") or MODEL
        head = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        if not request.get("stream"):
            if self.delay:
                await asyncio.sleep(self.delay * len(self.tokens))
            answer = {**head, "object": "chat.completion"}
            answer["choices"] = [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.reply},
                    "finish_reason": "stop",
                }
            ]
            answer["usage"] = usage
            await _json(send, 200, answer)
            return

        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            value = {
                **head,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if include_usage:
                value["usage"] = None
            return b"data: " + _dumps(value) + b"\n\n"

        tail = chunk({}, "stop")
        if include_usage:
            tail += b"data: " + _dumps({**head, "choices": [], "usage": usage}) + b"\n\n"
        tail += b"data: [DONE]\n\n"
        opening = chunk({"role": "assistant", "content": ""})
        await send({"type": "http.response.start", "status": 200, "headers": _SSE})
        if not self.delay:  # every chunk in one write: the cheapest fake
            body = opening + b"".join(chunk({"content": t}) for t in self.tokens) + tail
            await send({"type": "http.response.body", "body": body})
            return

        marker = _MARKER.search(_text(messages[-1].get("content"))) if messages else None
        await send({"type": "http.response.body", "body": opening, "more_body": True})
        first = last = 0.0
        for token in self.tokens:
            await asyncio.sleep(self.delay)
            last = time.monotonic()
            first = first or last
            await send(
                {"type": "http.response.body", "body": chunk({"content": token}), "more_body": True}
            )
        await send({"type": "http.response.body", "body": tail})
        if marker is not None and self.timing is not None:
            self.timing.write(f"{marker.group(1)}\t{first:.6f}\t{last:.6f}\t{len(self.tokens)}\n")
            self.timing.flush()


async def _json(send: Send, status: int, value: object) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _JSON})
    await send({"type": "http.response.body", "body": _dumps(value)})


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--tokens", type=int, default=20, help="words in a reply")
    parser.add_argument("--token-delay-ms", type=float, default=0.0, help="sleep before each token")
    parser.add_argument("--timing-file", default=None, help="append first/last token times here")
    args = parser.parse_args()
    timing = open(args.timing_file, "a") if args.timing_file else None  # noqa: SIM115
    app = FakeLLM(args.tokens, args.token_delay_ms / 1000.0, timing)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
