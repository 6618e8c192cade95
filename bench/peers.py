"""The hub against its peers on the same fake model (issue 52): a lean a2a-sdk agent and
Google ADK's ``to_a2a``.

    uv run python bench/peers.py --setup          # once: the peers' venvs (uv, ~2 minutes)
    uv run python bench/peers.py [--rounds 3] [--window 10] [-c 16 [-c 64]] [--no-adk]

Each server is a process of its own on 127.0.0.1, answering blocking ``SendMessage`` calls
(A2A 1.0, a new message each) to one agent, Socrates, whose system prompt each is given:

- **hub**: ``persona-agent serve`` at its defaults (``bench/run.py``'s: the bundled
  personas, SQLite in ``./data``, only ``PERSONA_AGENT_LLM_BASE_URL`` set), restarted: its
  database made by ``persona-agent db upgrade`` first;
- **lean**: ``bench/bare_agent.py --llm URL --lean``, the a2a-sdk's handler and routes,
  tasks in memory, one shared ``AsyncOpenAI`` stream a message, the answer one artifact:
  what a user of a2a-sdk and openai writes in an afternoon. It runs in a venv of its own
  holding only ``a2a-sdk[http-server]``, ``openai[aiohttp]`` and ``uvicorn[standard]``
  (the project's versions), as such a user installs it; without that venv, on the
  project's Python (which holds the hub's other packages: SQLAlchemy and gRPC are then
  loaded by the SDK too, so its RSS is larger), and the table says so; with that venv,
  also on the project's Python as **lean-here**, so the packages' part is seen apart;
- **adk**: ``bench/adk_agent.py`` (``google-adk[a2a]`` and ``litellm`` in a venv of their
  own; the ``LiteLlm`` model to the same fake), when that venv is there.

The fake LLM is the tests' (``tests/fakes/fake_llm.py``: 20 one-word tokens, each an SSE
event, at once). Every server is warmed first; then each round loads each server for a
window (``bench/loadgen.py``: a closed loop of ``-c`` connections, every answer checked),
the order rotating from round to round, so that a machine whose speed drifts weighs on
all alike. Figures: requests a second, the server's CPU a request (``/proc``), p50/p99,
and its RSS at rest (started, settled, before any request; with its PSS, USS and the part
of mapped files) and after the load; the
hub's ratios to each peer are taken within a round, then the median. The machine may be
shared: compare ratios, and look at the load average printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

from run import (
    BENCH,
    ENV,
    MODEL,
    PYTHON,
    REFERENCE_ENV,
    fake_llm,
    free_port,
    hub,
    hub_home,
    load,
    process,
    rss_kib,
    socrates_prompt,
)

VENVS = Path(
    os.environ.get("PERSONA_AGENT_BENCH_VENVS", Path.home() / ".cache/persona-agent-bench")
)
"""Where the peers' venvs live: never in the project's environment."""


def packages() -> dict[str, list[str]]:
    """Each peer venv's packages: the project's a2a-sdk and openai versions, so that the
    SDK path compared is the same."""
    sdk, openai = version("a2a-sdk"), version("openai")
    return {
        "lean": [f"a2a-sdk[http-server]=={sdk}", f"openai[aiohttp]=={openai}", "uvicorn[standard]"],
        "adk": ["google-adk[a2a]", "litellm", f"a2a-sdk[http-server]=={sdk}", "uvicorn[standard]"],
    }


def venv_python(name: str) -> Path | None:
    python = VENVS / name / "bin" / "python"
    return python if python.exists() else None


def setup() -> None:
    """The peers' venvs, made with uv on this Python."""
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("--setup needs uv (https://docs.astral.sh/uv/)")
    for name, wanted in packages().items():
        target = VENVS / name
        subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(target)], check=True)
        env = {**os.environ, "VIRTUAL_ENV": str(target)}
        subprocess.run([uv, "pip", "install", "-q", *wanted], check=True, env=env)
        print(f"{name}: {target}", file=sys.stderr)


@contextmanager
def lean_agent(llm: str, root: Path, python: Path | None = None) -> Iterator[tuple[str, int]]:
    """The lean agent on ``python``: its own venv's by default (else the project's)."""
    python = python or venv_python("lean") or Path(sys.executable)
    port = free_port()
    command = [str(python), str(BENCH / "bare_agent.py"), "--port", str(port), "--lean"]
    command += ["--llm", llm, "--model", MODEL, "--system-prompt-file", str(socrates_prompt(root))]
    ready = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    with process(command, ready, REFERENCE_ENV) as started:
        yield f"http://127.0.0.1:{port}/", started.pid


@contextmanager
def adk_agent(llm: str, root: Path, python: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    command = [str(python), str(BENCH / "adk_agent.py"), "--port", str(port), "--llm", llm]
    command += ["--model", MODEL, "--system-prompt-file", str(socrates_prompt(root))]
    # LiteLLM would fetch its price list from GitHub at start-up: its own copy instead.
    env = {**ENV, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    ready = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    with process(command, ready, env) as started:
        yield f"http://127.0.0.1:{port}/", started.pid


@contextmanager
def hub_server(llm: str, root: Path, src: Path | None = None) -> Iterator[tuple[str, int]]:
    """The hub; with ``src``, the hub of that source tree (an earlier commit's
    ``git archive``): a before/after in one run."""
    name = "hub" if src is None else "hub-before"
    settings = {} if src is None else {"PYTHONPATH": str(src.resolve())}
    home = hub_home(root, name)
    # A restart, as most starts are: the database migrated before (a start that migrates
    # keeps Alembic loaded, ~10 MiB: docs/performance.md).
    upgrade = [PYTHON, "-m", "persona_agent.cli", "db", "upgrade"]
    subprocess.run(upgrade, cwd=home, env={**ENV, **settings}, capture_output=True, check=True)
    with hub(llm, home, settings=settings) as (url, started):
        yield f"{url}/a2a/socrates/", started.pid


def at_rest(pid: int, settle: float = 3.0) -> dict[str, float]:
    """A started server's memory once it has settled, in MiB (``/proc/PID/smaps_rollup``):
    ``rss``; ``pss``, its share of pages mapped by other processes too; ``uss``, its own
    pages alone (private: what stopping it frees); ``file``, the RSS of mapped files
    (code, a model's weights), which the kernel may drop and read again."""
    time.sleep(settle)
    kib: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        field, _, rest = line.partition(":")
        if rest.strip().endswith(" kB"):
            kib[field] = int(rest.split()[0])
    return {
        "rss": kib["Rss"] / 1024,
        "pss": kib["Pss"] / 1024,
        "uss": (kib["Private_Clean"] + kib["Private_Dirty"]) / 1024,
        "file": (kib["Rss"] - kib["Anonymous"]) / 1024,
    }


def warm(url: str, sends: int = 40) -> None:
    """A server's first calls (imports, caches, connections), unmeasured; errors allowed."""
    command = [PYTHON, str(BENCH / "loadgen.py"), "--url", url, "--mode", "send", "-c", "4"]
    command += ["-d", "120", "--warmup", "0", "--max-requests", str(sends), "--timeout", "120"]
    subprocess.run(command, env=ENV, capture_output=True, check=False)


def run_load(
    url: str, pid: int, concurrency: int, window: float, warmup: float = 2
) -> dict[str, Any]:
    # A long timeout: on a shared machine an answer may take seconds, and is still counted.
    sends = ["--mode", "send", "-c", str(concurrency), "-d", str(window), "--warmup", str(warmup)]
    try:
        summary = load(url, *sends, "--timeout", "120", "--watch-pid", f"server={pid}")
    except RuntimeError as error:
        raise RuntimeError(
            f"{url}: {error} (no answer within the window? a busy machine needs a longer --window)"
        ) from None
    summary["cpu_ms"] = summary["server_cpu_pct"]["server"] * 10 / summary["rps"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--setup", action="store_true", help="make the peers' venvs, then stop")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0, help="measured seconds a run")
    parser.add_argument("-c", "--concurrency", type=int, action="append")
    parser.add_argument("--no-adk", action="store_true", help="the lean agent only")
    parser.add_argument(
        "--before", type=Path, help="also a hub of this source tree (its src/), as hub-before"
    )
    args = parser.parse_args()
    if args.setup:
        setup()
        return 0
    levels = args.concurrency or [16]
    adk_python = None if args.no_adk else venv_python("adk")
    if adk_python is None and not args.no_adk:
        print(
            f"no ADK venv at {VENVS / 'adk'} (bench/peers.py --setup): the lean agent only",
            file=sys.stderr,
        )
    lean_where = "its own venv" if venv_python("lean") else "the project's venv"
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    rest: dict[str, dict[str, float]] = {}
    after: dict[str, float] = {}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="persona-agent-peers-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        llm = stack.enter_context(fake_llm())
        servers = {"hub": stack.enter_context(hub_server(llm, root))}
        if args.before is not None:
            servers["hub-before"] = stack.enter_context(hub_server(llm, root, args.before))
        servers["lean"] = stack.enter_context(lean_agent(llm, root))
        if venv_python("lean") is not None:  # also on the hub's packages: what they cost it
            here = lean_agent(llm, root, Path(sys.executable))
            servers["lean-here"] = stack.enter_context(here)
        if adk_python is not None:
            servers["adk"] = stack.enter_context(adk_agent(llm, root, adk_python))
        for name, (_, pid) in servers.items():
            rest[name] = at_rest(pid, settle=1.0)
        for url, _ in servers.values():
            warm(url)
        names = list(servers)
        for round_ in range(args.rounds):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for concurrency in levels:
                for name in order:
                    url, pid = servers[name]
                    summary = run_load(url, pid, concurrency, args.window)
                    runs.setdefault((name, concurrency), []).append(summary)
                    print(
                        f"    round {round_ + 1}, c={concurrency}, {name}: {summary['rps']:.1f} "
                        f"req/s, {summary['cpu_ms']:.2f} ms CPU a request, p50 "
                        f"{summary['latency_ms']['p50']:.0f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
        for name, (_, pid) in servers.items():
            after[name] = rss_kib(pid) / 1024
    report(names, levels, runs, rest, after, lean_where)
    print(
        f"\n{args.rounds} round(s) of {args.window:.0f} s; {(time.monotonic() - began) / 60:.1f} "
        f"min; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    return 0


def median(values: list[float]) -> float:
    return statistics.median(values)


def report(
    names: list[str],
    levels: list[int],
    runs: dict[tuple[str, int], list[dict[str, Any]]],
    rest: dict[str, dict[str, float]],
    after: dict[str, float],
    lean_where: str,
) -> None:
    print(f"\nlean agent: {lean_where}; lean-here: the lean agent on the project's venv\n")
    print("| server | RSS at rest | PSS | USS | of the RSS, mapped files |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in names:
        memory = rest[name]
        print(
            f"| {name} | {memory['rss']:.0f} MiB | {memory['pss']:.0f} MiB | "
            f"{memory['uss']:.0f} MiB | {memory['file']:.0f} MiB |"
        )
    print("\n| server | c | req/s | CPU a request | p50 | p99 | RSS at rest | RSS after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for concurrency in levels:
        for name in names:
            done = runs[(name, concurrency)]
            print(
                f"| {name} | {concurrency} | {median([d['rps'] for d in done]):.1f} | "
                f"{median([d['cpu_ms'] for d in done]):.2f} ms | "
                f"{median([d['latency_ms']['p50'] for d in done]):.0f} ms | "
                f"{median([d['latency_ms']['p99'] for d in done]):.0f} ms | "
                f"{rest[name]['rss']:.0f} MiB | {after[name]:.0f} MiB |"
            )
    print("\n| the hub against | c | req/s (x) | CPU a request (x) | RSS at rest (x) | USS (x) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for peer in names[1:]:
        for concurrency in levels:
            hub_runs, peer_runs = runs[("hub", concurrency)], runs[(peer, concurrency)]
            pairs = list(zip(hub_runs, peer_runs, strict=True))
            rps = median([h["rps"] / p["rps"] for h, p in pairs])
            cpu = median([h["cpu_ms"] / p["cpu_ms"] for h, p in pairs])
            print(
                f"| {peer} | {concurrency} | {rps:.2f} | {cpu:.2f} | "
                f"{rest['hub']['rss'] / rest[peer]['rss']:.2f} | "
                f"{rest['hub']['uss'] / rest[peer]['uss']:.2f} |"
            )


if __name__ == "__main__":
    sys.exit(main())
