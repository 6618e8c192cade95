"""The ``openai`` backend's CPU per streamed event (issue 34): what reading a model's stream
costs the hub, per SSE event the server sends.

The fake LLM runs as a process of its own (its CPU is not counted); this process streams
``--answers`` answers of ``--tokens`` tokens through :class:`OpenAIBackend` (the hub's
backend, one shared client) and reports its own CPU time per event received (each token is
an event and a write of its own, plus the usage event), with the same client reading the
stream the stock way (``AsyncStream``: a pydantic model per chunk) for comparison. The
backend is measured both ways the hub asks: streamed (a client watches the answer grow:
the reader task and its pacing) and whole (a blocking send: read in place).

    uv run python bench/llm_stream.py [--answers 300] [--tokens 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO)]

from persona_agent.llm.base import ChatRequest  # noqa: E402
from persona_agent.llm.openai_backend import OpenAIBackend  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_ready(url: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(200):
            try:
                if (await http.get(f"{url}/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError("the fake LLM did not start")


async def _hub_backend(base_url: str, answers: int, whole: bool) -> tuple[float, int]:
    """CPU seconds and events of ``answers`` streams through the hub's backend."""
    backend = OpenAIBackend(base_url=base_url, api_key="k", model="fake-llm", max_retries=0)
    request = ChatRequest(
        messages=[{"role": "user", "content": "hi"}], model="fake-llm", whole=whole
    )
    events = 0
    async for _ in backend.stream(request):  # warm-up: the client and its connection
        pass
    started = time.process_time()
    for _ in range(answers):
        async for _piece in backend.stream(request):
            pass
        events += 1
    spent = time.process_time() - started
    await backend.aclose()
    return spent, events


async def _stock_client(base_url: str, answers: int) -> tuple[float, int]:
    """The same streams read the client's stock way: a pydantic chunk per event."""
    client = openai.AsyncOpenAI(
        base_url=base_url, api_key="k", http_client=openai.DefaultAioHttpClient()
    )

    async def one() -> int:
        stream = await client.chat.completions.create(
            model="fake-llm",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        count = 0
        async with stream:
            async for _chunk in stream:
                count += 1
        return count

    await one()
    started = time.process_time()
    chunks = 0
    for _ in range(answers):
        chunks += await one()
    spent = time.process_time() - started
    await client.close()
    return spent, chunks


def _start_fake(tokens: int) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PERSONA_AGENT_", "OTEL_"))}
    command = [sys.executable, "-m", "tests.fakes.fake_llm", "--port", str(port)]
    command.append("--write-each-token")
    process = subprocess.Popen(
        [*command, "--tokens", str(tokens)],
        cwd=REPO,
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return process, port


async def _measure(tokens: int, answers: int) -> tuple[float, float, float, int]:
    """CPU seconds of the stock client and of the hub's backend (streamed, whole), and
    events per answer."""
    fake, port = _start_fake(tokens)
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        await _wait_ready(f"http://127.0.0.1:{port}")
        stock, chunks = await _stock_client(base_url, answers)
        hub, _answers = await _hub_backend(base_url, answers, whole=False)
        whole, _answers = await _hub_backend(base_url, answers, whole=True)
    finally:
        fake.terminate()
        fake.wait()
    return stock, hub, whole, chunks // answers


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=20)
    args = parser.parse_args()
    # Per event: the difference between long and one-token answers, over the events
    # that make the difference (the request's own cost cancels out).
    stock_long, hub_long, whole_long, long_events = await _measure(args.tokens, args.answers)
    stock_short, hub_short, whole_short, short_events = await _measure(1, args.answers)
    extra = (long_events - short_events) * args.answers
    print(
        f"{args.answers} answers of {args.tokens} tokens ({long_events} SSE events each) and of 1"
    )
    for name, long, short in (
        ("stock client (a pydantic chunk per event)", stock_long, stock_short),
        ("hub's openai backend, streamed", hub_long, hub_short),
        ("hub's openai backend, whole (blocking send)", whole_long, whole_short),
    ):
        per_event = (long - short) / extra * 1e6
        per_answer = short / args.answers * 1e3
        print(f"{name:44} {per_event:7.1f} us CPU per event, {per_answer:6.2f} ms per request")


if __name__ == "__main__":
    asyncio.run(main())
