"""What one blocking send costs the hub, for one source tree or several side by side (issue 52).

    uv run python bench/request_cost.py [--src PATH ...] [--rounds 6] [--window 8]
    uv run python bench/request_cost.py --src /tmp/before/src --src src --instructions 300
    uv run python bench/request_cost.py --py-spy /tmp/profile.txt   # where the CPU goes

Each hub is ``persona-agent serve`` at the bench's defaults (``bench/run.py``: a directory
of its own with the bundled personas, SQLite, only the fake LLM's URL set), each ``--src``
tree (a ``src`` directory: ``git worktree add`` or ``git archive``) run by the project's
Python through ``PYTHONPATH``; the load is ``bench/loadgen.py``'s blocking sends to
Socrates at c=16, a new message (and so a new conversation) each.

- by default, **CPU time a request**: the hub's CPU (``/proc``) over a window, over the
  requests answered in it; each round restarts every hub, the order alternating from round
  to round; the medians, and the ratio of the second tree to the first. On a shared machine
  it moves with the neighbours' load (the cache they thrash, the batching a lower rate
  loses): compare trees within a run, and say the load average printed;
- ``--instructions N``: the **instructions a request** valgrind's callgrind counts (every
  thread, user space) over N requests after 100 warm-up ones: the figure a busy machine
  does not move (within about 1 %), but blind to the kernel's share (a thread's wake-up);
- ``--py-spy FILE``: py-spy's samples of one hub (``uvx py-spy``, from PyPI) under the load,
  written to FILE (its ``raw`` format), then each sample put under the part of the request
  it belongs to (the first listed part its stack shows, leaf first), in milliseconds of CPU
  a request (the shares scaled to the CPU time a request measured without the sampler).
  Samples of idle threads (waiting for work) are left out.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from run import cpu_ms_per_request, fake_llm, hub, hub_home, load

PATH = "/a2a/socrates/"
PARTS = [
    ("logging (the access log line)", ["logging/"]),
    ("database: SQLite in its reader and writer threads", ["SqliteFile._query", "SqliteFile._run"]),
    ("database: hand-offs to its threads, the group commit", ["persona_agent/db/", "concurrent/"]),
    (
        "the openai client: its request, retries, transport (aiohttp)",
        ["openai/", "aiohttp/", "httpx2/", "yarl/", "multidict/"],
    ),
    ("the backend reading the stream (SSE, orjson, chunks)", ["persona_agent/llm/"]),
    (
        "the engine: prompt, prompt record, history, user, documents",
        [f"persona_agent/{p}/" for p in ("chat", "personas", "conversations", "knowledge")],
    ),
    ("the SDK's event queue (culsans, aiologic)", ["culsans/", "aiologic/", "a2a/server/events/"]),
    (
        "the SDK's request handler, active task, task manager",
        ["a2a/server/agent_execution", "a2a/server/request_handlers", "a2a/server/tasks"],
    ),
    ("the SDK's helpers", ["a2a/helpers", "a2a/utils"]),
    ("the SDK's JSON-RPC dispatch, protobuf and JSON", ["a2a/server/routes", "protobuf", "json/"]),
    ("the executor and the task's lifecycle (hub)", ["persona_agent/a2a/tasks/"]),
    (
        "the hub's edge: router, admission, forwarding, SDK fixes, security",
        [f"persona_agent/{p}/" for p in ("a2a", "security", "api", "observe", "memory")],
    ),
    ("uvicorn and Starlette (HTTP)", ["uvicorn/", "starlette/"]),
    ("asyncio (tasks, futures), uuid", ["asyncio/", "uuid", "contextlib", "weakref", "typing"]),
]
"""The parts of a request, each by what its stack frames name, in the order they are tried."""
IDLE = ("concurrent/futures/thread.py:81)", "anyio/_backends/_asyncio.py:1124)")
"""Leaf frames of a thread waiting for work."""


def sends(window: float, warmup: float = 1) -> list[str]:
    return ["--mode", "send", "-c", "16", "-d", str(window), "--warmup", str(warmup)]


def cpu_rounds(trees: list[str], rounds: int, window: float, llm: str, root: Path) -> None:
    """CPU time a request of each tree, alternating, each hub restarted each round."""
    per: dict[str, list[float]] = collections.defaultdict(list)
    for number in range(rounds):
        for index, tree in enumerate(trees if number % 2 == 0 else trees[::-1]):
            home = hub_home(root, f"hub-{number}-{index}")
            with hub(llm, home, settings={"PYTHONPATH": tree}) as (url, started):
                load(url + PATH, *sends(2))
                summary = load(url + PATH, *sends(window), "--watch-pid", f"server={started.pid}")
            per[tree].append(cpu_ms_per_request(summary))
            print(
                f"round {number + 1}: {tree}: {per[tree][-1]:.2f} ms a request, "
                f"{summary['rps']:.0f} req/s, load average {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
            )
    for tree in trees:
        runs = ", ".join(f"{value:.2f}" for value in per[tree])
        print(f"{tree}: median {statistics.median(per[tree]):.2f} ms a request ({runs})")
    if len(trees) >= 2:
        first, second = per[trees[0]], per[trees[1]]
        ratio = statistics.median(b / a for a, b in zip(first, second, strict=True))
        print(f"second / first: {ratio:.3f} (median of the rounds' ratios)")


def instructions(trees: list[str], requests: int, llm: str, root: Path) -> None:
    """Instructions a request of each tree, counted by callgrind."""
    for index, tree in enumerate(trees):
        out = root / f"callgrind-{index}.out"
        wrapper = ("valgrind", "--tool=callgrind", "--instr-atstart=no")
        home = hub_home(root, f"callgrind-{index}")
        with hub(llm, home, (*wrapper, f"--callgrind-out-file={out}"), {"PYTHONPATH": tree}) as (
            url,
            started,
        ):
            counted = ("--mode", "send", "-c", "16", "-d", "3600", "--warmup", "0")
            load(url + PATH, *counted, "--max-requests", "100")
            control = ["callgrind_control", "-i", "on", str(started.pid)]
            subprocess.run(control, check=True, capture_output=True)
            load(url + PATH, *counted, "--max-requests", str(requests))
            control[2] = "off"
            subprocess.run(control, check=True, capture_output=True)
            subprocess.run(["callgrind_control", "-d", str(started.pid)], check=True)
        total = 0
        for dump in root.glob(f"callgrind-{index}.out*"):
            for line in dump.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    total += int(line.split()[1])
        print(f"{tree}: {total / requests / 1e6:.2f} M instructions a request")


def py_spy(tree: str, out: Path, window: float, llm: str, root: Path) -> None:
    """py-spy's samples of a hub under load, by part of the request."""
    with hub(llm, hub_home(root, "sampled"), settings={"PYTHONPATH": tree}) as (url, started):
        load(url + PATH, *sends(2))
        ms = cpu_ms_per_request(
            load(url + PATH, *sends(window), "--watch-pid", f"server={started.pid}")
        )
        record = ["uvx", "py-spy", "record", "--pid", str(started.pid), "--format", "raw"]
        record += ["--rate", "200", "--duration", str(int(window)), "--nonblocking", "-o", str(out)]
        sampler = subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        load(url + PATH, *sends(window - 1))
        sampler.wait()
    counts: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        frames = stack.split(";")
        if not frames[-1].strip() or frames[-1].endswith(IDLE):
            continue
        counts[_part(frames)] += int(number)
    total = sum(counts.values())
    print(f"CPU a request without the sampler: {ms:.2f} ms; load average {os.getloadavg()[0]:.1f}")
    print("\n| part of the request | CPU a request | share |\n| --- | ---: | ---: |")
    for part, number in counts.most_common():
        print(f"| {part} | {number / total * ms:.2f} ms | {number / total:.0%} |")


def _part(frames: list[str]) -> str:
    """The part a sample belongs to: the event loop's own when its leaf is the loop's run,
    else the first part the stack names, leaf first."""
    if "Runner.run" in frames[-1]:
        return "the event loop itself (uvloop: polling, callbacks)"
    for frame in reversed(frames):
        for part, marks in PARTS:
            if any(mark in frame for mark in marks):
                return part
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--src", action="append", help="a source tree (repeatable)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--window", type=float, default=8.0, help="measured seconds a run")
    parser.add_argument("--instructions", type=int, metavar="N", help="callgrind, N requests")
    parser.add_argument("--py-spy", type=Path, metavar="FILE", help="sample one hub")
    args = parser.parse_args()
    trees = [str(Path(tree).resolve()) for tree in args.src or [Path(__file__).parents[1] / "src"]]
    with tempfile.TemporaryDirectory(prefix="request-cost-") as tmp, fake_llm() as llm:
        if args.py_spy is not None:
            py_spy(trees[0], args.py_spy, args.window, llm, Path(tmp))
        elif args.instructions:
            instructions(trees, args.instructions, llm, Path(tmp))
        else:
            cpu_rounds(trees, args.rounds, args.window, llm, Path(tmp))
    print(json.dumps({"load_average": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
