"""The embedded model's two paths side by side, interleaved: the openai path (today's
``LocalBackend``) against the in-process calls it replaced (issue 49 item 2).

    git worktree add /tmp/inproc 2fb4857      # the last commit with the in-process bridge
    uv run python bench/local_paths.py --old-src /tmp/inproc/src [--pairs 6] [--threads 1]

Both backends run in this process, each with its own llama.cpp server on the same model,
and are asked the same things in turn (old, new, new, old, ...) with the same seed, so a
machine whose load drifts (other work beside it) weighs on both alike. For each: the time
to first text of a persona's new conversation (the persona already read) and of a
conversation's second message, tokens a second of one stream and of four at once, and the
CPU time of the process while each answered (nothing else runs then), per token.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import resource
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

from local_model import QUESTIONS, one_answer  # type: ignore[import-not-found]

from persona_agent.llm.local.backend import LocalBackend
from persona_agent.personas.scan import load_persona_dir

REPO = Path(__file__).resolve().parents[1]


def old_backend(src: Path) -> Any:
    """The ``LocalBackend`` class of an older checkout, its own server and chat-template
    modules in place while it is imported."""
    local = src / "persona_agent" / "llm" / "local"
    saved = {name: sys.modules[name] for name in list(sys.modules) if ".llm.local." in name}
    try:
        for name in ("server", "chat_template"):
            _load(f"persona_agent.llm.local.{name}", local / f"{name}.py")
        return _load("inproc_backend", local / "backend.py").LocalBackend
    finally:
        sys.modules.update(saved)


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-src", type=Path, required=True)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--model-dir", type=Path, default=Path("data/models"))
    args = parser.parse_args()
    personas, _ = load_persona_dir(REPO / "personas")
    ordered = [p for _, p in sorted(personas.items())]
    options = {"model_dir": args.model_dir, "max_tokens": args.max_tokens}
    backends = {
        "in-process": old_backend(args.old_src)(threads=args.threads, seed=7, **options),
        "openai path": LocalBackend(threads=args.threads, seed=7, **options),
    }
    for llm in backends.values():
        await llm.load()
        for persona in ordered:  # every persona read once, by each
            await one_answer(llm, persona, QUESTIONS[0])
    seen: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    try:
        for pair in range(args.pairs):
            persona = ordered[pair % len(ordered)]
            turns = list(backends.items())
            for name, llm in turns if pair % 2 == 0 else reversed(turns):  # each first in turn
                figures = seen[name]
                began = cpu()
                first, total, tokens, said = await one_answer(llm, persona, QUESTIONS[1])
                figures["new conversation ttft ms"].append(first * 1000)
                figures["one stream tokens/s"].append(tokens / (total - first))
                earlier = (
                    {"role": "user", "content": QUESTIONS[1]},
                    {"role": "assistant", "content": said},
                )
                first, total, more, _ = await one_answer(llm, persona, QUESTIONS[2], earlier)
                figures["second message ttft ms"].append(first * 1000)
                start = time.perf_counter()
                four = await asyncio.gather(
                    *(
                        one_answer(llm, ordered[(pair + i) % len(ordered)], QUESTIONS[0])
                        for i in range(4)
                    )
                )
                made = sum(answer[2] for answer in four)
                figures["four at once, aggregate tokens/s"].append(
                    made / (time.perf_counter() - start)
                )
                figures["CPU ms a token"].append(
                    (cpu() - began) * 1000 / max(tokens + more + made, 1)
                )
            print(f"pair {pair + 1} done", flush=True)
    finally:
        for llm in backends.values():
            await llm.aclose()
    for name, figures in seen.items():
        print(name)
        for what, values in figures.items():
            runs = ", ".join(f"{value:.0f}" if value >= 100 else f"{value:.1f}" for value in values)
            print(f"  {what}: median {statistics.median(values):.1f} ({runs})")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process (both servers) {rss:.0f} MB")


if __name__ == "__main__":
    asyncio.run(main())
