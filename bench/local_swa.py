"""Gemma 3's sliding-window layers with and without the full KV cache: what a persona's
prefix reuse, RSS and first words do under each (docs/local-model.md, "Gemma 3's sliding
window without the full cache").

    uv run python bench/local_swa.py [--setting full] [--setting swa:32:8192] ...
                                     [--rounds 1] [--many 8] [--max-tokens 64]

A setting is ``full`` (``swa_full``, the hub's default) or ``swa:CHECKPOINTS:MIN_STEP``
(``swa_full`` off, llama.cpp's context checkpoints: how many a slot keeps and the fewest
tokens between two; ``swa:32:8192`` is llama.cpp's default). The bench sets them on the
server's parameters (``xllamacpp.Server`` wrapped in this process only), the hub's
``LocalBackend`` otherwise at its defaults (4 slots, every core, ``slot_dir`` set). Each
setting runs in a process of its own, settings alternating within a round: the model
loaded (RSS at rest), the five bundled personas warmed, a new conversation with each,
its second and third messages, ``--many`` more two-message conversations four at a time
(RSS after), two long transcripts and a new conversation with each persona again; then
a restarted process restores the saved prefixes and opens a new conversation with each.

Prints each process's figures as one JSON line, then a line a setting: the prompt tokens
found in the server's cache out of those sent (``cached/sent``) and the median first text
of each step, and RSS at rest and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "Who are you, and what do you do?",
    "What is the most important thing you have learned?",
    "What would you tell a young person who wants to follow your path?",
]


def rss_mb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    return 0


def apply_setting(setting: str) -> None:
    """Wrap ``xllamacpp.Server`` so that the server starts with ``setting``."""
    if setting == "full":
        return
    _, checkpoints, min_step = setting.split(":")
    import xllamacpp

    from persona_agent.llm.local.server import choose_openmp_wait

    choose_openmp_wait(os.environ)  # before xllamacpp loads, as the hub does
    original = xllamacpp.Server

    def server(params: Any) -> Any:
        params.swa_full = False
        params.n_ctx_checkpoints = int(checkpoints)
        params.checkpoint_min_step = int(min_step)
        return original(params)

    xllamacpp.Server = server


async def ask(llm: Any, persona: Any, question: str, earlier: tuple[Any, ...] = ()) -> dict:
    from persona_agent.llm.base import ChatRequest, StreamEnd, TextDelta
    from persona_agent.personas.prompt import render_system_prompt

    request = ChatRequest(
        messages=[
            {"role": "system", "content": render_system_prompt(persona)},
            *earlier,
            {"role": "user", "content": question},
        ],
        persona=persona,
    )
    start = time.perf_counter()
    first, text, sent, cached = 0.0, "", 0, 0
    async for item in llm.stream(request):
        if isinstance(item, TextDelta):
            first = first or time.perf_counter() - start
            text += item.text
        elif isinstance(item, StreamEnd):
            sent, cached = item.usage.prompt_tokens, item.usage.cached_prompt_tokens
    return {"first": round(first * 1000), "sent": sent, "cached": cached, "text": text}


def turn(question: str, answer: dict) -> tuple[dict[str, str], dict[str, str]]:
    return {"role": "user", "content": question}, {"role": "assistant", "content": answer["text"]}


async def one_process(args: argparse.Namespace) -> dict[str, Any]:
    from persona_agent.llm.local.backend import LocalBackend
    from persona_agent.personas.scan import load_persona_dir

    found, _ = load_persona_dir(REPO / "personas")
    personas = [p for _, p in sorted(found.items()) if p.panel is None]
    out: dict[str, Any] = {"setting": args.setting, "phase": args.phase}
    llm = LocalBackend(
        model_dir=args.model_dir, max_tokens=args.max_tokens, seed=7, slot_dir=args.slot_dir
    )
    keep = ("first", "sent", "cached")
    try:
        await llm.load()
        out["rss_rest"] = rss_mb()
        out["warmed"] = sorted(set((await llm.warm(personas)).values()))
        new = {p.id: await ask(llm, p, QUESTIONS[0]) for p in personas}
        out["new"] = [{k: r[k] for k in keep} for r in new.values()]
        if args.phase == "restart":
            return out
        second = {
            p.id: await ask(llm, p, QUESTIONS[1], turn(QUESTIONS[0], new[p.id])) for p in personas
        }
        out["second"] = [{k: r[k] for k in keep} for r in second.values()]
        third = [
            await ask(
                llm,
                p,
                QUESTIONS[2],
                (*turn(QUESTIONS[0], new[p.id]), *turn(QUESTIONS[1], second[p.id])),
            )
            for p in personas
        ]
        out["third"] = [{k: r[k] for k in keep} for r in third]

        async def conversation(i: int) -> list[dict]:
            persona, question = personas[i % len(personas)], f"{QUESTIONS[1]} ({i})"
            a = await ask(llm, persona, question)
            b = await ask(llm, persona, QUESTIONS[2], turn(question, a))
            return [{k: r[k] for k in keep} for r in (a, b)]

        many: list[list[dict]] = []
        for start in range(0, args.many, 4):
            many += await asyncio.gather(
                *(conversation(i) for i in range(start, min(start + 4, args.many)))
            )
        out["many_new"] = [pair[0] for pair in many]
        out["many_second"] = [pair[1] for pair in many]
        out["rss_after"] = rss_mb()
        long_question = "What do you make of " + "the stars, the sea and the seasons, " * 90
        for persona in personas[1:3]:
            await ask(llm, persona, long_question.rstrip(", ") + "?")
        again = [await ask(llm, p, "Tell me about yourself.") for p in personas]
        out["again"] = [{k: r[k] for k in keep} for r in again]
        out["rss_end"] = rss_mb()
    finally:
        await llm.aclose()
    return out


def summary(fresh: dict[str, Any], restart: dict[str, Any]) -> str:
    def step(rows: list[dict]) -> str:
        if not rows:
            return "-"
        cached = sum(r["cached"] for r in rows)
        sent = sum(r["sent"] for r in rows)
        return f"{cached}/{sent} {statistics.median(r['first'] for r in rows):.0f} ms"

    return (
        f"{fresh['setting']}: RSS {fresh['rss_rest']} MB at rest, {fresh['rss_after']} after, "
        f"{fresh['rss_end']} at the end | new {step(fresh['new'])} | second {step(fresh['second'])}"
        f" | third {step(fresh['third'])} | many: new {step(fresh['many_new'])}, second "
        f"{step(fresh['many_second'])} | again {step(fresh['again'])} | restart "
        f"({','.join(restart['warmed'])}) {step(restart['new'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", action="append", default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--many", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--model-dir", type=Path, default=REPO / "data" / "models")
    parser.add_argument("--phase", choices=("fresh", "restart"), default=None)  # a child's
    parser.add_argument("--slot-dir", type=Path, default=None)
    args = parser.parse_args()
    if args.phase is not None:
        apply_setting(args.setting[0])
        args.setting = args.setting[0]
        print(json.dumps(asyncio.run(one_process(args))), flush=True)
        return
    lines = []
    for round_ in range(args.rounds):
        settings = args.setting or ["full", "swa:32:8192"]
        for setting in settings if round_ % 2 == 0 else reversed(settings):
            with tempfile.TemporaryDirectory() as slots:
                figures = []
                for phase in ("fresh", "restart"):
                    child = [sys.executable, __file__, "--phase", phase, "--setting", setting]
                    child += ["--slot-dir", slots, "--model-dir", str(args.model_dir)]
                    child += ["--many", str(args.many), "--max-tokens", str(args.max_tokens)]
                    done = subprocess.run(child, capture_output=True, text=True, check=True)
                    figures.append(json.loads(done.stdout.strip().splitlines()[-1]))
                    print(done.stdout.strip().splitlines()[-1], flush=True)
                lines.append(summary(*figures))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
