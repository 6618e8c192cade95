"""One engine's figures in a process of its own, for ``local_model.py --against-binding``.

    python bench/local_engine.py --src SRC [--site DIR] --model-dir DIR --phase fresh|restart|rest
                                 [--slot-dir DIR] [--max-tokens N] [--seed N] [--concurrent N]
                                 [--threads N] [--slots N] [--cache-type-k T] [--cache-type-v T]

Imports ``persona_agent`` from ``--src`` (today's tree: the server behind the openai path;
the tree of the commit before issue 49's switch: ``llama-cpp-python`` in process, one
generation at a time), the other packages from this interpreter and then from ``--site``
(the project's venv, appended: the binding's throwaway venv holds only the binding), and
runs the ``LocalBackend`` of that tree as a hub would, at the hub's defaults (threads,
slots, context, sampling, the answer cap; OpenMP's wait policy as each tree leaves it).

``fresh``: the model loaded, the memory at rest; each bundled persona's new conversation
cold (never read), one at a time; its second message; a new conversation with each again
(the persona read); ``--concurrent`` conversations asked at once; the memory after; then,
with ``--slot-dir`` (the server), the warm-up that saves the prefixes a restart restores.
``rest``: the model loaded, the memory at rest, nothing asked. ``restart``: the model
loaded (and with ``--slot-dir`` the warm-up restoring the saved prefixes, as the hub does
after start-up), then each persona's new conversation.

Prints one JSON object on its last line of stdout: the figures (seconds, tokens/s, bytes),
the load average before and after, the CPU seconds of the process (every thread) over the
conversations and the tokens they generated.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any


def memory() -> dict[str, int]:
    """The process's RSS and PSS now, and its peak RSS, in bytes."""
    found: dict[str, int] = {}
    for name, key in (("/proc/self/status", "VmRSS:"), ("/proc/self/smaps_rollup", "Pss:")):
        try:
            for line in Path(name).read_text().splitlines():
                if line.startswith(key):
                    found[key.rstrip(":").lower()] = int(line.split()[1]) * 1024
                    break
        except OSError:
            pass
    found["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"rss": found.get("vmrss", 0), "pss": found.get("pss", 0), "peak": found["peak"]}


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


async def answer(
    llm: Any, persona: Any, question: str, earlier: tuple[Any, ...] = ()
) -> dict[str, Any]:
    """One answer: seconds to the first text, seconds in all, tokens, text."""
    from local_model import one_answer  # type: ignore[import-not-found]

    first, total, tokens, text = await one_answer(llm, persona, question, earlier)
    return {"first": first, "total": total, "tokens": tokens, "text": text}


def speed(results: list[dict[str, Any]]) -> float:
    """Tokens a second of generation over ``results`` (first text to last)."""
    tokens = sum(r["tokens"] for r in results)
    seconds = sum(r["total"] - r["first"] for r in results if r["total"] > r["first"])
    return tokens / seconds if seconds else 0.0


async def fresh(
    llm: Any, personas: list[Any], args: argparse.Namespace, out: dict[str, Any]
) -> None:
    """Cold, second message, persona read, ``--concurrent`` at once; then the warm-up."""
    from local_model import QUESTIONS

    cold = [await answer(llm, p, QUESTIONS[0]) for p in personas]
    second = []
    for persona, said in zip(personas, cold, strict=True):
        earlier = (
            {"role": "user", "content": QUESTIONS[0]},
            {"role": "assistant", "content": said["text"]},
        )
        second.append(await answer(llm, persona, QUESTIONS[1], earlier))
    again = [await answer(llm, p, QUESTIONS[2]) for p in personas]
    out["cold_first"] = [r["first"] for r in cold]
    out["second_first"] = [r["first"] for r in second]
    out["read_first"] = [r["first"] for r in again]
    singles = cold + second + again
    out["one_speed"] = speed(singles)
    out["one_speeds"] = [round(speed([r]), 1) for r in singles if r["tokens"] > 1]
    out["one_tokens"] = [r["tokens"] for r in singles]
    start = time.perf_counter()
    asked = [
        answer(llm, personas[i % len(personas)], f"{QUESTIONS[1]} ({i + 1})")
        for i in range(args.concurrent)
    ]
    together = await asyncio.gather(*asked)
    wall = time.perf_counter() - start
    out["many_aggregate"] = sum(r["tokens"] for r in together) / wall
    out["many_speeds"] = [round(speed([r]), 1) for r in together]
    out["many_first"] = [r["first"] for r in together]
    out["many_tokens"] = [r["tokens"] for r in together]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from persona_agent.llm.local.backend import LocalBackend
    from persona_agent.personas.scan import load_persona_dir

    found, _ = load_persona_dir(args.personas)
    personas = [p for _, p in sorted(found.items()) if p.panel is None]
    extra: dict[str, Any] = {}
    if args.slot_dir is not None:
        extra["slot_dir"] = args.slot_dir
    if args.slots is not None:
        extra["slots"] = args.slots
    for name in ("cache_type_k", "cache_type_v"):
        if getattr(args, name) is not None:
            extra[name] = getattr(args, name)
    out: dict[str, Any] = {"load_before": os.getloadavg()[0], "pid": os.getpid()}
    llm = LocalBackend(
        model_dir=args.model_dir,
        max_tokens=args.max_tokens,
        threads=args.threads,
        seed=args.seed,
        **extra,
    )
    try:
        start = time.perf_counter()
        await llm.load()
        out["load_seconds"] = time.perf_counter() - start
        out["rest"] = memory()
        warm = getattr(llm, "warm", None)
        if args.phase == "restart" and warm is not None and args.slot_dir is not None:
            start = time.perf_counter()
            how = await warm(personas)
            out["warm_seconds"] = time.perf_counter() - start
            out["warmed"] = sorted(how.values())  # "restored": the saved prefixes were used
            out["rest_warmed"] = memory()
        used, made = cpu(), llm.tokens_generated
        if args.phase == "rest":
            return out
        if args.phase == "fresh":
            await fresh(llm, personas, args, out)
        else:
            from local_model import QUESTIONS

            out["restart_first"] = [(await answer(llm, p, QUESTIONS[0]))["first"] for p in personas]
        out["cpu_seconds"] = cpu() - used
        out["tokens"] = llm.tokens_generated - made
        out["after"] = memory()
        if args.phase == "fresh" and warm is not None and args.slot_dir is not None:
            await warm(personas)  # saves the prefixes the restart restores
    finally:
        await llm.aclose()
    out["load_after"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, required=True, help="the tree of persona_agent")
    parser.add_argument("--site", type=Path, default=None, help="more packages, appended")
    parser.add_argument("--personas", type=Path, required=True)
    parser.add_argument("--model-dir", type=Path, required=True)
    parser.add_argument("--phase", choices=("fresh", "restart", "rest"), required=True)
    parser.add_argument("--slot-dir", type=Path, default=None)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--threads", type=int, default=None, help="default: every core")
    parser.add_argument("--slots", type=int, default=None, help="the server's; its default")
    parser.add_argument("--cache-type-k", default=None, help="f16 or q8_0; the backend's default")
    parser.add_argument("--cache-type-v", default=None, help="f16 or q8_0; the backend's default")
    args = parser.parse_args()
    sys.path.insert(1, str(args.src))
    if args.site is not None:
        sys.path.append(str(args.site))  # not addsitedir: its .pth would add today's tree
    print(json.dumps(asyncio.run(run(args))), flush=True)


if __name__ == "__main__":
    main()
