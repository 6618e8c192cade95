"""Where ``persona-agent serve`` spends its bytes and its milliseconds (issue 52).

    uv run python bench/serve_profile.py [--window 10] [--top 25] [--only PART] [--save F]
    uv run python bench/serve_profile.py --only holdings --top 20   # what the idle hub holds

Runs the hub as ``bench/run.py`` does (its default configuration, only the fake LLM's URL
set, a directory of its own with the bundled personas, its database migrated by a first
start), four times over, then probes the features a hub at its defaults leaves unloaded:

0. ``holdings``: each module's load timed by an import hook (``importlib._bootstrap``'s
   ``_load_unlocked``) for the RSS it added, its nested loads' apart, and the module whose
   code imported it; once the hub has settled: its RSS, PSS, USS and mapped files
   (``/proc/PID/smaps_rollup``), and the RSS the loads added, summed by package and by the
   hub's module that brought each in (the first of the hub's modules up the chain of
   importers), then by the hub's package: what loaded what, in MiB;
1. ``imports``: ``python -X importtime``: the import time of every module, summed by
   package (a package's own modules' time, its dependencies apart), and the modules loaded;
2. ``heap``: with ``tracemalloc`` on from the first line, once ``/healthz`` answers and
   the hub has settled: the resident set (``/proc``) and the Python allocations still
   held, summed by package (where the allocating line is);
3. ``cpu``: ``cProfile`` over blocking sends to Socrates at c=16 (``bench/loadgen.py``):
   the functions taking the most time of their own, and the hub's CPU a request
   (``/proc``) with the profiler off, for scale. cProfile slows what it measures and sees
   the event loop's thread alone (not the database's threads): read its shares, not its
   seconds. A coroutine's every resumption counts as a call of it;
4. ``features``: each feature's modules imported into a process holding what the hub at
   its defaults holds: the RSS, modules and import time that feature adds when it loads.

The hub process is run by a wrapper that turns the profiler on at ``SIGUSR1`` and off at
``SIGUSR2`` (writing the statistics), and writes the tracemalloc snapshot at ``SIGHUP``.
Prints a report in Markdown; its figures are in docs/performance.md (issue 52).
"""

from __future__ import annotations

import argparse
import collections
import json
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from peers import at_rest
from run import ENV, LOGS, PYTHON, fake_llm, free_port, hub_home, load, process, rss_kib

HOLDINGS_HOOK = """
import importlib._bootstrap, os, sys
_statm, _page = os.open("/proc/self/statm", os.O_RDONLY), os.sysconf("SC_PAGE_SIZE")
_loads, _loading, _load = {}, [], importlib._bootstrap._load_unlocked

def _rss():
    return int(os.pread(_statm, 64, 0).split()[1]) * _page

def _importer():
    frame = sys._getframe(2)
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen")
        or frame.f_globals.get("__name__") == "importlib"  # import_module()
    ):
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None

def _measured_load(spec):
    entry = _loads[spec.name] = [0, _importer(), _loading[-1] if _loading else None]
    _loading.append(spec.name)
    before = _rss()
    try:
        return _load(spec)
    finally:
        _loading.pop()
        entry[0] = _rss() - before

importlib._bootstrap._load_unlocked = _measured_load
"""
"""Run first by the wrapper for ``holdings``: each module's load, with the RSS it added
(its own imports' included), the module whose code imported it and the load it nested in."""

WRAPPER = """
import cProfile, json, os, runpy, signal, sys, tracemalloc
if os.environ.get("PROFILE_HOLDINGS"):
    exec(os.environ["PROFILE_HOLDINGS"])
out = sys.argv.pop(1)
profile = cProfile.Profile()

def snapshot(*_):
    if "_loads" in globals():
        with open(out + ".loads", "w") as loads:
            json.dump(_loads, loads)
        return
    stats = tracemalloc.take_snapshot().statistics("filename")
    with open(out + ".heap", "w") as heap:
        for stat in stats:
            heap.write(f"{stat.size}\\t{stat.count}\\t{stat.traceback[0].filename}\\n")

def start(*_):
    profile.enable()

def stop(*_):
    profile.disable()
    profile.dump_stats(out + ".prof")

signal.signal(signal.SIGHUP, snapshot)
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
runpy.run_module("persona_agent.cli", run_name="__main__", alter_sys=True)
"""
"""``python -c`` this, an output path, then ``serve``'s arguments."""


def package_of(path: str) -> str:
    """A file's package, for sums: ``site-packages/sqlalchemy/orm/x.py`` is ``sqlalchemy``,
    the hub's own ``persona_agent/a2a/x.py`` is ``persona_agent.a2a``."""
    if "site-packages/" in path:
        parts = path.split("site-packages/", 1)[1].split("/")
    elif "/src/persona_agent/" in path:
        parts = ["persona_agent", *path.split("/src/persona_agent/", 1)[1].split("/")]
    elif "/lib/python3" in path:
        return "(standard library)"
    else:
        return path
    top = parts[0].removesuffix(".py")
    if top in ("persona_agent", "a2a", "opentelemetry", "google") and len(parts) > 2:
        return f"{top}.{parts[1].removesuffix('.py')}"
    return top


def import_times(log: str) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """``-X importtime``'s lines: microseconds and modules, each by top-level package."""
    time_by: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for line in log.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.split(":", 1)[1].split("|")
        parts = name.strip().split(".")
        key = (
            ".".join(parts[:2])
            if parts[0] in ("persona_agent", "a2a", "opentelemetry")
            else parts[0]
        )
        time_by[key] += int(own)
        count[key] += 1
    return time_by, count


def start_hub(
    llm: str, home: Path, out: Path, *flags: str
) -> tuple[str, list[str], dict[str, str]]:
    port = free_port()
    env = {**ENV, "PERSONA_AGENT_LLM_BASE_URL": llm, **SETTINGS}
    command = [PYTHON, *flags, "-c", WRAPPER, str(out), "serve", "--port", str(port)]
    return f"http://127.0.0.1:{port}", command, env


SETTINGS: dict[str, str] = {}


FEATURES = {
    "the openai backend (a base URL set)": ["persona_agent.llm.openai_backend"],
    "the embedded model's engine (no base URL)": ["persona_agent.llm.local.backend", "llama_cpp"],
    "migrations (a database to upgrade)": ["persona_agent.migrations", "alembic.command"],
    "memory's default embedder (memory on, or a document)": [
        "persona_agent.memory.embeddings",
        "wordllama",
    ],
    "tracing (an OTEL_* exporter)": [
        "opentelemetry.sdk.trace",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    ],
    "gRPC (PERSONA_AGENT_GRPC_PORT)": ["persona_agent.api.grpc.grpc_service", "grpc.aio"],
    "the MCP door (the first request to /mcp)": ["persona_agent.api.mcp.mcp_server"],
    "OIDC or card signing (an issuer, a key)": ["persona_agent.security.oidc", "jwt"],
    "Pillow (an image, a PNG card)": ["PIL.Image", "PIL.PngImagePlugin"],
    "pypdf (a PDF document)": ["pypdf"],
    "speech's engine (a client asks for audio)": ["piper", "onnxruntime"],
    "WebSockets (uvicorn's ws=auto; the hub says none)": ["uvicorn.protocols.websockets.auto"],
    "the OpenAI-compatible door (the first request to /v1)": [
        "persona_agent.api.openai.completions_door"
    ],
    "chat files (the first conversation export or import)": [
        "persona_agent.conversations.files.json_chat",
        "persona_agent.conversations.files.markdown_chat",
        "persona_agent.conversations.files.sillytavern",
    ],
    "h11 (uvicorn's parser where httptools is not installed)": ["uvicorn.protocols.http.h11_impl"],
}
"""What a hub at its defaults does not load, and the modules each feature loads when asked."""

FEATURE_PROBE = """
import importlib, json, sys, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
import persona_agent.api.app, persona_agent.cli.commands  # the hub at its defaults
before, modules, began = rss(), len(sys.modules), time.perf_counter()
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps([rss() - before, len(sys.modules) - modules, time.perf_counter() - began]))
"""


def features() -> None:
    """Each feature's modules imported into a process that holds what a hub at its
    defaults does: the RSS, modules and import time they add."""
    print("## What each feature costs when it loads\n")
    print("| feature | modules | RSS | import time |\n| --- | ---: | ---: | ---: |")
    for feature, modules in FEATURES.items():
        done = subprocess.run(
            [PYTHON, "-c", FEATURE_PROBE, *modules], env=ENV, capture_output=True, text=True
        )
        if done.returncode != 0:
            print(f"| {feature} | not installed | | |")
            continue
        rss, count, seconds = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"| {feature} | {count} | +{rss / 1024:.1f} MiB | {seconds * 1000:.0f} ms |")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--window", type=float, default=10.0, help="seconds of load profiled")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--setting", action="append", default=[], help="NAME=VALUE, repeatable")
    parser.add_argument("--save", type=Path, help="keep cProfile's statistics in this file")
    parser.add_argument(
        "--only",
        choices=["holdings", "imports", "heap", "cpu", "features"],
        action="append",
        help="one part (repeatable)",
    )
    args = parser.parse_args()
    SETTINGS.update(item.split("=", 1) for item in args.setting)
    with tempfile.TemporaryDirectory(prefix="persona-agent-profile-") as tmp, fake_llm() as llm:
        root = Path(tmp)
        home = hub_home(root, "hub")
        out = root / "out"
        # A first start migrates the database: the starts measured are restarts.
        url, command, env = start_hub(llm, home, out)
        with process(command, f"{url}/healthz", env, cwd=home):
            pass
        print(f"# serve profile ({time.strftime('%Y-%m-%d %H:%M')})\n")
        parts = args.only or ["holdings", "imports", "heap", "cpu", "features"]
        if "holdings" in parts:
            holdings(llm, home, out, args.top)
        if "imports" in parts:
            imports(llm, home, out, args.top)
        if "heap" in parts:
            heap(llm, home, out, args.top)
        if "cpu" in parts:
            cpu(llm, home, out, args.top, args.window)
            if args.save:
                shutil.copy(out.with_suffix(".prof"), args.save)
        if "features" in parts:
            features()
    return 0


def imports(llm: str, home: Path, out: Path, top: int) -> None:
    url, command, env = start_hub(llm, home, out, "-X", "importtime")
    with process(command, f"{url}/healthz", env, cwd=home):
        log = LOGS[-1]  # the server's stderr, where -X importtime writes
    times, counts = import_times(log.read_text(errors="replace"))
    total = sum(times.values())
    print(f"## Imports: {sum(counts.values())} modules, {total / 1e6:.2f} s of import time\n")
    print("| package | modules | import time (own) | share |\n| --- | ---: | ---: | ---: |")
    for name, micros in times.most_common(top):
        print(f"| `{name}` | {counts[name]} | {micros / 1000:.0f} ms | {micros / total:.1%} |")
    print()


def dumped(path: Path) -> Path:
    """``path`` once the hub (sent SIGHUP) has written it: non-empty, then given half a
    second to finish; at most a minute."""
    for _ in range(600):
        if path.exists() and path.stat().st_size:
            time.sleep(0.5)
            break
        time.sleep(0.1)
    return path


def heap(llm: str, home: Path, out: Path, top: int) -> None:
    url, command, env = start_hub(llm, home, out, "-X", "tracemalloc=1")
    with process(command, f"{url}/healthz", env, cwd=home) as started:
        time.sleep(3)  # what the start left to do in the background
        rss = rss_kib(started.pid)
        started.send_signal(signal.SIGHUP)
        heap_file = dumped(out.with_suffix(".heap"))
    sizes: collections.Counter[str] = collections.Counter()
    for line in heap_file.read_text().splitlines():
        size, _, path = line.split("\t")
        sizes[package_of(path)] += int(size)
    total = sum(sizes.values())
    print(
        f"## Memory at rest: RSS {rss / 1024:.1f} MiB (tracemalloc on), "
        f"{total / 2**20:.1f} MiB of Python allocations held\n"
    )
    print("| package (allocating line) | held | share |\n| --- | ---: | ---: |")
    for name, size in sizes.most_common(top):
        print(f"| `{name}` | {size / 2**20:.2f} MiB | {size / total:.1%} |")
    print()


def loaded_by(loads: dict[str, list[Any]], name: str) -> str:
    """The hub's module whose import brought ``name`` in: the first of the hub's modules up
    the chain of importers (``name`` itself when it is one of them)."""
    seen: set[str] = set()
    while name and name not in seen and not name.startswith("persona_agent"):
        seen.add(name)
        name = loads[name][1] if name in loads else ""
    return name if name.startswith("persona_agent") else "(before the hub: Python, the wrapper)"


def holdings(llm: str, home: Path, out: Path, top: int) -> None:
    """What each module's load added to the RSS (its nested loads' apart), summed by package
    and by the hub's module that brought it in: the holdings of the hub at rest."""
    url, command, env = start_hub(llm, home, out)
    env["PROFILE_HOLDINGS"] = HOLDINGS_HOOK
    with process(command, f"{url}/healthz", env, cwd=home) as started:
        memory = at_rest(started.pid, settle=4.0)
        started.send_signal(signal.SIGHUP)
        loads_file = dumped(out.with_suffix(".loads"))
    loads: dict[str, list[Any]] = json.loads(loads_file.read_text())
    own = {name: entry[0] for name, entry in loads.items()}
    for entry in loads.values():
        if entry[2] in own:
            own[entry[2]] -= entry[0]  # a nested load's bytes are the nested module's
    by: collections.Counter[tuple[str, str]] = collections.Counter()
    count: collections.Counter[tuple[str, str]] = collections.Counter()
    feature: collections.Counter[str] = collections.Counter()
    for name, size in own.items():
        hub = loaded_by(loads, name)
        package = name.split(".")[0] if not name.startswith("persona_agent") else "(the hub's own)"
        by[package, hub] += size
        count[package, hub] += 1
        feature[".".join(hub.split(".")[:2])] += size
    mib = 2**20
    print(
        f"## Holdings at rest: RSS {memory['rss']:.1f} MiB, PSS {memory['pss']:.1f}, "
        f"USS {memory['uss']:.1f}, mapped files {memory['file']:.1f}; {len(loads)} modules "
        f"loaded, adding {sum(own.values()) / mib:.1f} MiB\n"
    )
    print("| package | brought in by (the hub's module) | modules | RSS added |")
    print("| --- | --- | ---: | ---: |")
    for (package, hub), size in by.most_common(top):
        print(f"| `{package}` | `{hub}` | {count[package, hub]} | {size / mib:.1f} MiB |")
    print("\n| the hub's package | RSS added by its modules and what they brought in |")
    print("| --- | ---: |")
    for name, size in feature.most_common(top):
        print(f"| `{name}` | {size / mib:.1f} MiB |")
    print()


def cpu(llm: str, home: Path, out: Path, top: int, window: float) -> None:
    url, command, env = start_hub(llm, home, out)
    rpc = f"{url}/a2a/socrates/"
    with process(command, f"{url}/healthz", env, cwd=home) as started:
        plain = load(
            rpc,
            "--mode",
            "send",
            "-c",
            "16",
            "-d",
            str(window),
            "--warmup",
            "2",
            "--watch-pid",
            f"server={started.pid}",
        )
        started.send_signal(signal.SIGUSR1)
        profiled = load(
            rpc,
            "--mode",
            "send",
            "-c",
            "16",
            "-d",
            str(window),
            "--watch-pid",
            f"server={started.pid}",
        )
        started.send_signal(signal.SIGUSR2)
        prof = out.with_suffix(".prof")
        for _ in range(600):
            if prof.exists() and prof.stat().st_size:
                time.sleep(0.5)
                break
            time.sleep(0.1)
    per_request = plain["server_cpu_pct"]["server"] * 10 / plain["rps"]
    stats = pstats.Stats(str(prof))
    requests = profiled["ok"]
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in entries.values())
    by_package: collections.Counter[str] = collections.Counter()
    for (path, _, _), entry in entries.items():
        by_package[package_of(path)] += entry[2]
    print(
        f"## CPU a request: {per_request:.2f} ms (c=16, {plain['rps']:.0f} req/s, profiler off)\n"
    )
    print(f"Profiled: {requests} requests, {profiled['rps']:.0f} req/s.\n")
    print("| package (own time) | share |\n| --- | ---: |")
    for name, seconds in by_package.most_common(top):
        print(f"| `{name}` | {seconds / total:.1%} |")
    print("\n| function (own time) | calls a request | share |\n| --- | ---: | ---: |")
    ranked = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for (path, line, name), entry in ranked:
        where = f"{package_of(path)}:{Path(path).name}:{line} {name}" if line else name
        print(f"| `{where}` | {entry[1] / requests:.1f} | {entry[2] / total:.1%} |")
    print("\n| function (cumulative, the hub's own) | share |\n| --- | ---: |")
    own = [item for item in entries.items() if "/persona_agent/" in item[0][0]]
    for (path, line, name), entry in sorted(own, key=lambda item: item[1][3], reverse=True)[:top]:
        print(f"| `{package_of(path)}:{Path(path).name}:{line} {name}` | {entry[3] / total:.1%} |")
    print()
    json.dump({"plain": plain, "profiled": profiled}, sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
