"""The hub's CPU a streamed token when every token is an event of its own: hubs of one or
more source trees, side by side, rounds interleaved.

    uv run python bench/stream_cost.py [--streams 32] [--rounds 3] [--window 10] \
        [--src PATH ...]

The fake LLM (each token an SSE event and a write of its own, 100 tokens 20 ms apart)
serves each hub in turn; ``--streams`` streaming sends at once (32: the hub far from
saturated, so it coalesces nothing and each token is an artifact-update event: unlike the
256 slow streams of ``run.py``, whose saturated servers coalesce as they can, the figure
counts the same work for every tree). Each hub's CPU (``/proc``) over the window, over the
tokens the fake wrote in it. ``--src``: a source tree (a ``src`` directory) to run a hub
from, repeatable (default: this checkout's); a tree of an earlier commit
(``git worktree add`` or ``git archive``) gives a before/after on the same machine in the
same run. Prints each round, then the medians and, with two trees, the medians of the
rounds' ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as bench  # the suite's processes and /proc readings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=32, help="streaming sends at once")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--src", action="append", type=Path, help="a source tree (repeatable)")
    args = parser.parse_args()
    trees = [path.resolve() for path in args.src or [bench.REPO / "src"]]
    root = Path(tempfile.mkdtemp(prefix="bench-stream-cost-"))
    per: dict[int, list[float]] = {index: [] for index in range(len(trees))}
    with ExitStack() as stack:
        llm = stack.enter_context(bench.fake_llm(20, tokens=bench.SLOW_TOKENS))
        servers = []
        for index, tree in enumerate(trees):
            env = {"PYTHONPATH": str(tree), "PERSONA_AGENT_LLM_BASE_URL": llm}
            servers.append((index, bench.hub_home(root, f"hub-{index}"), {**bench.ENV, **env}))
        running = _hubs(stack, servers)
        for round_ in range(args.rounds):
            order = running if round_ % 2 == 0 else running[::-1]
            for index, url, started in order:
                per[index].append(_measure(args, llm, url, started.pid))
                print(f"    {trees[index]}: {per[index][-1]:.1f} µs CPU a token", flush=True)
    for index, tree in enumerate(trees):
        values = ", ".join(f"{value:.1f}" for value in per[index])
        print(f"{tree}: median {statistics.median(per[index]):.1f} µs a token ({values})")
    if len(trees) == 2:
        ratios = [after / before for before, after in zip(per[0], per[1], strict=True)]
        print(f"second / first, median of the rounds' ratios: {statistics.median(ratios):.3f}")
    with open("/proc/loadavg", encoding="ascii") as load:
        print(f"load average {load.read().split()[0]}; {args.streams} streams")
    return 0


def _hubs(
    stack: ExitStack, servers: list[tuple[int, Path, dict[str, str]]]
) -> list[tuple[int, str, subprocess.Popen[bytes]]]:
    """A hub for each source tree, each in a home of its own; stopped with ``stack``."""
    running = []
    for index, home, env in servers:
        port = bench.free_port()
        command = [bench.PYTHON, "-m", "persona_agent.cli", "serve", "--port", str(port)]
        ready = f"http://127.0.0.1:{port}/healthz"
        started = stack.enter_context(bench.process(command, ready, env, cwd=home))
        running.append((index, f"http://127.0.0.1:{port}/a2a/socrates/", started))
    return running


def _measure(args: argparse.Namespace, llm: str, url: str, pid: int) -> float:
    """One run of the load generator on ``url``: the hub's CPU µs a token over the window."""
    command = [bench.PYTHON, str(bench.BENCH / "loadgen.py"), "--url", url, "--mode", "stream"]
    command += ["-c", str(args.streams), "-d", str(args.window), "--warmup", str(args.warmup)]
    load = subprocess.Popen(
        [*command, "--timeout", "120"],
        env=bench.ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(args.warmup)
    cpu0, tokens0 = bench.cpu_seconds(pid), bench.fake_llm_chunks(llm)
    time.sleep(args.window)
    cpu1, tokens1 = bench.cpu_seconds(pid), bench.fake_llm_chunks(llm)
    stdout, stderr = load.communicate()
    summary = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    if not summary or summary["errors"]:
        raise RuntimeError(f"stream cost: {summary.get('error_kinds')} {stderr[-1000:]}")
    return (cpu1 - cpu0) / max(tokens1 - tokens0, 1) * 1e6


if __name__ == "__main__":
    sys.exit(main())
