"""The gRPC figures (issue 39): blocking sends over gRPC against JSON-RPC on the same hub.

    python bench/grpc_send.py [--rounds 3] [--window 10]
    python bench/grpc_send.py --cost   # what gRPC on costs a hub: start-up time, memory

One hub (``persona-agent serve`` at its defaults, ``PERSONA_AGENT_GRPC_PORT`` set) and the
fake LLM of ``run.py`` (20 tokens at once), each a process of its own. Each round runs, on
Socrates, ``loadgen.py``'s blocking JSON-RPC sends at c=16 and this file's gRPC load
generator at c=16 (the order alternating from round to round), then gRPC at c=64 for its
tail. Targets: gRPC's throughput at c=16 at least JSON-RPC's (the median of the rounds'
ratios), and p99/p50 at c=64 at most 3. The hub's CPU per answered request is reported for
each (from ``/proc``), and the machine's load average, as the machine may be shared.

The gRPC load generator (``--client``, a process of its own): ``-c`` workers, each on a
channel of its own (its own HTTP/2 connection), each sending one ``SendMessage`` at a time
through the SDK's generated stub with the persona as ``tenant``, every answer checked
(a completed task with answer text). It prints one JSON line as ``loadgen.py`` does.
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
import urllib.request
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # persona_agent, tests

from run import (
    ENV,
    PYTHON,
    Row,
    cpu_seconds,
    fake_llm,
    free_port,
    hub,
    hub_home,
    load,
    rss_kib,
)

TARGET_RATIO = 1.0
TARGET_TAIL = 3.0


async def _client(address: str, tenant: str, concurrency: int, seconds: float, pid: int) -> None:
    import grpc.aio
    from a2a.types import a2a_pb2, a2a_pb2_grpc

    latencies: list[float] = []
    errors: dict[str, int] = {}
    window = [0.0, 0.0]
    warmup = min(2.0, seconds / 4)

    async def worker() -> None:
        options = [("grpc.use_local_subchannel_pool", 1)]
        async with grpc.aio.insecure_channel(address, options=options) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            while time.monotonic() < window[1]:
                message = a2a_pb2.Message(
                    message_id=str(uuid.uuid4()),
                    role=a2a_pb2.Role.ROLE_USER,
                    parts=[a2a_pb2.Part(text="What is virtue?")],
                )
                request = a2a_pb2.SendMessageRequest(message=message, tenant=tenant)
                started = time.monotonic()
                try:
                    answer = await stub.SendMessage(
                        request, metadata=[("a2a-version", "1.0")], timeout=60
                    )
                except grpc.aio.AioRpcError as error:
                    kind = f"grpc_{error.code().name}"
                    errors[kind] = errors.get(kind, 0) + 1
                    continue
                ended = time.monotonic()
                task = answer.task
                text = "".join(p.text for a in task.artifacts for p in a.parts)
                if task.status.state != a2a_pb2.TaskState.TASK_STATE_COMPLETED or not text:
                    errors["not_completed"] = errors.get("not_completed", 0) + 1
                elif window[0] <= started and ended <= window[1]:
                    latencies.append(ended - started)

    now = time.monotonic()
    window[:] = [now + warmup, now + warmup + seconds]
    runs = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
    await asyncio.sleep(warmup)
    cpu0, self0 = cpu_seconds(pid), time.process_time()
    await asyncio.sleep(seconds)
    cpu1, self1 = cpu_seconds(pid), time.process_time()
    await asyncio.gather(*runs)
    ordered = sorted(latencies)

    def at(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000, 3)

    print(
        json.dumps(
            {
                "mode": "grpc-send",
                "concurrency": concurrency,
                "ok": len(ordered),
                "errors": sum(errors.values()),
                "error_kinds": errors,
                "rps": round(len(ordered) / seconds, 2),
                "latency_ms": {"p50": at(0.5), "p99": at(0.99)} if ordered else {},
                "server_cpu_pct": {"server": round(100 * (cpu1 - cpu0) / seconds, 1)},
                "client_cpu_pct": round(100 * (self1 - self0) / seconds, 1),
            }
        )
    )


def grpc_load(address: str, concurrency: int, seconds: float, pid: int) -> dict[str, Any]:
    """One run of the gRPC load generator, in a process of its own; its JSON summary."""
    command = [PYTHON, __file__, "--client", address, "-c", str(concurrency)]
    command += ["-d", str(seconds), "--watch-pid", str(pid)]
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the gRPC load generator failed:\n{done.stderr[-2000:]}")
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if summary["errors"] or not summary["ok"]:
        raise RuntimeError(f"gRPC answers failed the checks: {summary}")
    return summary


def cpu_ms(summary: dict[str, Any]) -> float:
    return float(summary["server_cpu_pct"]["server"]) * 10 / float(summary["rps"])


def measure(rounds: int, window: float, root: Path) -> list[Row]:
    grpc_port = free_port()
    settings = {"PERSONA_AGENT_GRPC_PORT": str(grpc_port)}
    ratios: list[float] = []
    rps: dict[str, list[float]] = {"jsonrpc": [], "grpc": []}
    cpu: dict[str, list[float]] = {"jsonrpc": [], "grpc": []}
    tails: list[float] = []
    load_avg: list[float] = []
    with fake_llm() as llm, hub(llm, hub_home(root, "hub-grpc"), settings=settings) as (url, p):
        address = f"127.0.0.1:{grpc_port}"
        for number in range(rounds):
            load_avg.append(os.getloadavg()[0])
            runs: dict[str, dict[str, Any]] = {}
            for binding in ("jsonrpc", "grpc") if number % 2 == 0 else ("grpc", "jsonrpc"):
                if binding == "grpc":
                    runs[binding] = grpc_load(address, 16, window, p.pid)
                else:
                    args = ("--mode", "send", "-c", "16", "-d", str(window))
                    runs[binding] = load(
                        f"{url}/a2a/socrates/", *args, "--watch-pid", f"server={p.pid}"
                    )
            for binding, summary in runs.items():
                rps[binding].append(float(summary["rps"]))
                cpu[binding].append(cpu_ms(summary))
            ratios.append(float(runs["grpc"]["rps"]) / float(runs["jsonrpc"]["rps"]))
            wide = grpc_load(address, 64, window, p.pid)
            tails.append(wide["latency_ms"]["p99"] / wide["latency_ms"]["p50"])
    ratio, tail = statistics.median(ratios), statistics.median(tails)
    rounds_seen = {"rps": rps, "ratios": ratios, "cpu_ms": cpu, "tails": tails, "load": load_avg}
    print("rounds:", json.dumps(rounds_seen, default=lambda v: round(v, 3)), file=sys.stderr)
    return [
        Row("JSON-RPC send c=16 (median)", statistics.median(rps["jsonrpc"]), "req/s"),
        Row("gRPC send c=16 (median)", statistics.median(rps["grpc"]), "req/s"),
        Row("gRPC / JSON-RPC, c=16", ratio, "x", f">= {TARGET_RATIO:g}", ratio >= TARGET_RATIO),
        Row("gRPC p99/p50, c=64", tail, "x", f"<= {TARGET_TAIL:g}", tail <= TARGET_TAIL),
        Row("hub CPU a JSON-RPC send", statistics.median(cpu["jsonrpc"]), "ms"),
        Row("hub CPU a gRPC send", statistics.median(cpu["grpc"]), "ms"),
        Row("load average (1 min) at the rounds' starts", max(load_avg), ""),
    ]


def default_cost(root: Path, starts: int = 3) -> list[Row]:
    """What gRPC on costs a hub at its defaults: the time from start to ``/healthz`` and the
    RSS once one card has been served, off and on (the medians of ``starts`` starts each)."""
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    rss: dict[str, list[int]] = {"off": [], "on": []}
    with fake_llm() as llm:
        for number in range(starts):
            for state in ("off", "on") if number % 2 == 0 else ("on", "off"):
                on = {"PERSONA_AGENT_GRPC_PORT": str(free_port())} if state == "on" else {}
                home = hub_home(root, f"hub-{state}-{number}")
                started = time.monotonic()
                with hub(llm, home, settings=on) as (url, process):
                    seconds[state].append(time.monotonic() - started)
                    urllib.request.urlopen(f"{url}/a2a/socrates/.well-known/agent-card.json").read()
                    rss[state].append(rss_kib(process.pid))
    start_off, start_on = statistics.median(seconds["off"]), statistics.median(seconds["on"])
    rss_off, rss_on = statistics.median(rss["off"]), statistics.median(rss["on"])
    return [
        Row("start to /healthz, gRPC off (median)", start_off, "s"),
        Row("start to /healthz, gRPC on (median)", start_on, "s"),
        Row("RSS after a card, gRPC off (median)", rss_off / 1024, "MiB"),
        Row("RSS after a card, gRPC on (median)", rss_on / 1024, "MiB"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cost", action="store_true", help="only what gRPC on costs a hub")
    parser.add_argument("--window", type=float, default=10.0, help="seconds a run measures")
    parser.add_argument("--client", help="run the gRPC load generator against host:port")
    parser.add_argument("-c", type=int, default=16, help="the load generator's concurrency")
    parser.add_argument("-d", type=float, default=10.0, help="the load generator's window (s)")
    parser.add_argument("--tenant", default="socrates")
    parser.add_argument("--watch-pid", type=int, default=0, help="the hub's process id")
    args = parser.parse_args()
    if args.client:
        asyncio.run(_client(args.client, args.tenant, args.c, args.d, args.watch_pid))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-grpc-") as root:
        if args.cost:
            rows = default_cost(Path(root))
        else:
            rows = measure(args.rounds, args.window, Path(root))
    for row in rows:
        mark = "" if not row.target else ("  ok" if row.ok else "  MISSED")
        print(f"{row.figure:45} {row.value:10.2f} {row.unit:6} {row.target}{mark}")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
