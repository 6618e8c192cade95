"""The embedded llama.cpp server in-process against over its port through the openai client.

    uv run python bench/local_port.py [--model data/models/gemma-3-270m-q4_k_m.gguf]
                                      [--slots 4] [--runs 5]

A probe for issue 49, item 2 (docs/local-model.md, "One model path"):
one server, asked the same transcript both ways (``handle_completions`` in a worker
thread, as ``llm/local/backend.py`` does today, and ``/v1/completions`` through
``AsyncOpenAI``): time to first token, tokens per second, four at once; then closing
streams mid-answer (does the slot come free?), and the hub's ``OpenAIBackend`` through
``/v1/chat/completions`` with a pass-through chat template and the sampling settings as
the server's defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

import openai

from persona_agent.llm.base import ChatRequest, StreamEnd, TextDelta
from persona_agent.llm.local.server import choose_openmp_wait
from persona_agent.llm.openai_backend import OpenAIBackend

PROMPT = (
    "Marie Curie is a physicist and chemist who discovered polonium and radium.\n\n"
    "User: Who are you, and what do you do?\nMarie Curie:"
)
SAMPLING: dict[str, Any] = {
    "top_k": 40,
    "top_p": 0.9,
    "min_p": 0.05,
    "repeat_penalty": 1.1,
    "repeat_last_n": 128,
    "seed": 7,
    "cache_prompt": True,
}
PASS_THROUGH = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
N = 64


def start(model: Path, slots: int) -> Any:
    """The server, as ``llm/local/server.py`` starts it, plus the pass-through template and
    the tuned sampling as defaults."""
    choose_openmp_wait(os.environ)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_parallel = slots
    params.n_ctx = 2048 * slots
    params.kv_unified = True
    params.swa_full = True
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 2
    params.use_jinja = True
    params.chat_template = PASS_THROUGH
    sampling = params.sampling
    sampling.temp, sampling.top_k, sampling.top_p, sampling.min_p = 0.4, 40, 0.9, 0.05
    sampling.penalty_repeat, sampling.penalty_last_n, sampling.seed = 1.1, 128, 7
    params.verbosity = -1
    return xllamacpp.Server(params)


def in_process(server: Any) -> tuple[float, float, int]:
    """(first token s, tokens/s, tokens) through ``handle_completions`` (blocks)."""
    start_ = time.perf_counter()
    first = 0.0
    count = 0

    def on_chunk(chunk: dict[str, Any]) -> bool:
        nonlocal first, count
        if (chunk.get("choices") or [{}])[0].get("text"):
            count += 1
            first = first or time.perf_counter() - start_
        return False

    body = {"prompt": PROMPT, "n_predict": N, "ignore_eos": True, "stream": True, **SAMPLING}
    server.handle_completions(body, on_chunk)
    return first, count / (time.perf_counter() - start_ - first), count


async def over_port(client: openai.AsyncOpenAI) -> tuple[float, float, int]:
    """(first token s, tokens/s, tokens) through ``/v1/completions``."""
    start_ = time.perf_counter()
    first = 0.0
    count = 0
    stream = await client.completions.create(
        model="local",
        prompt=PROMPT,
        max_tokens=N,
        temperature=0.4,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, **SAMPLING},
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            count += 1
            first = first or time.perf_counter() - start_
    return first, count / (time.perf_counter() - start_ - first), count


async def cancel_frees_slots(client: openai.AsyncOpenAI, slots: int) -> None:
    """Fill every slot with a 400-token answer, close each after 3 tokens, time the next."""

    async def closed_early() -> None:
        stream = await client.completions.create(
            model="local",
            prompt=PROMPT,
            max_tokens=400,
            stream=True,
            extra_body={"ignore_eos": True, **SAMPLING},
        )
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == 3:
                break
        await stream.close()

    await asyncio.gather(*(closed_early() for _ in range(slots)))
    first, _, _ = await over_port(client)
    print(f"after closing {slots} streams of 400 tokens: next first token {first:.3f} s")


async def through_backend(address: str) -> None:
    """The hub's OpenAIBackend, unchanged, with the transcript as one user message."""
    backend = OpenAIBackend(base_url=address + "/v1", api_key=None, model="local", timeout=600)
    try:
        for _ in range(2):
            request = ChatRequest(
                messages=[{"role": "user", "content": PROMPT}],
                max_tokens=40,
                temperature=0.4,
                stop=["\nUser:", "\n\n"],
            )
            text, end, start_, first = "", None, time.perf_counter(), 0.0
            async for item in backend.stream(request):
                if isinstance(item, TextDelta):
                    first = first or time.perf_counter() - start_
                    text += item.text
                elif isinstance(item, StreamEnd):
                    end = item
            assert end is not None
            print(f"OpenAIBackend: first text {first:.3f} s, {end.usage}, {end.finish_reason}")
            print(f"  {text!r}")
    finally:
        await backend.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=Path("data/models/gemma-3-270m-q4_k_m.gguf"))
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    server = start(args.model, args.slots)
    address = server.listening_address
    client = openai.AsyncOpenAI(base_url=address + "/v1", api_key="not-needed")
    try:
        await over_port(client)
        await asyncio.to_thread(in_process, server)  # both warm
        inside, port = [], []
        for _ in range(args.runs):
            inside.append(await asyncio.to_thread(in_process, server))
            port.append(await over_port(client))
        for name, results in (("in-process", inside), ("over the port", port)):
            first = statistics.median(r[0] for r in results) * 1000
            speed = statistics.median(r[1] for r in results)
            runs = ", ".join(f"{r[1]:.1f}" for r in results)
            print(f"{name}: first token {first:.0f} ms, {speed:.1f} tokens/s ({runs})")
        for name in ("in-process", "over the port"):
            start_ = time.perf_counter()
            if name == "in-process":
                asked = [asyncio.to_thread(in_process, server) for _ in range(4)]
            else:
                asked = [over_port(client) for _ in range(4)]
            together = await asyncio.gather(*asked)
            wall = time.perf_counter() - start_
            print(f"{name}, four at once: {sum(r[2] for r in together) / wall:.1f} tokens/s")
        await cancel_frees_slots(client, args.slots)
        await through_backend(address)
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
