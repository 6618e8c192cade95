"""The whole benchmark suite: the hub against like-for-like a2a-sdk agents, figures next to
targets.

    uv run python bench/run.py [--quick] [--rounds 5] [--window 10] [--personas 10000]
                               [--requests 100000] [--no-callgrind] [--part NAME ...]

Starts, as separate processes on 127.0.0.1: the fake LLM (``tests/fakes/fake_llm.py``,
the tests' own, run as ``python -m tests.fakes.fake_llm``: each token an SSE event and a
write of its own, at once or 20 ms apart for the streaming figures), the hub
(``persona-agent serve`` in its default configuration:
only ``PERSONA_AGENT_LLM_BASE_URL`` is set, to the fake; run in a directory of its own,
so its default ``./personas`` and ``./data`` are the benchmark's), the like-for-like
agents (``bench/bare_agent.py --llm``: the SDK's handler and routes, tasks in memory, the
same streamed call as the hub's for Socrates through one shared ``AsyncOpenAI`` to the
same fake; the *lean* one answers with one artifact, the *streaming* one with an artifact
update a token), and the load generator (``bench/loadgen.py``, which checks every answer).
Both servers run on the same Python, uvicorn defaults (uvloop and httptools) and log
level (INFO, an access line a request); the agent with
``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``, what the hub's default must amount to
with no exporter configured. Each throughput round measures the hub, the agents, then
the hub again (half its window on each side); ratios are taken within a round, then the
median. The slow streams (``--part "slow streams"``) are 256 concurrent streaming sends,
a token every 20 ms: each server's CPU (``/proc``) a second and a token delivered (the
answer text that reached the load generator in the window), rounds interleaved. With
valgrind installed, each server also runs under callgrind for a count of instructions
per request, which the machine's speed does not move.

Prints one table: each figure, its target and PASS or FAIL, and exits 1 when a
target is missed. ``--quick`` runs one round with short windows, 1,000
personas and 20,000 requests for the memory figure: a smoke test, not a
measurement. Method and figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PYTHON = sys.executable
ENV = {
    k: v
    for k, v in os.environ.items()
    # Bytecode is written and used, as for any installed package: without it every
    # start compiles every module again (seconds on two cores).
    if not k.startswith(("PERSONA_AGENT_", "OPENAI_", "OTEL_")) and k != "PYTHONDONTWRITEBYTECODE"
}
"""The environment of every process: none of the developer's hub, LLM or telemetry settings."""
REFERENCE_ENV = {**ENV, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
"""The like-for-like agent's: no SDK spans, as the hub's default with no exporter."""
MODEL = "gpt-4o-mini"
"""The hub's default model, which the like-for-like agent names too."""


@dataclass
class Row:
    figure: str
    value: float
    unit: str
    target: str = ""
    ok: bool = True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def answers_200(url: str) -> bool:
    """Whether a GET of ``url`` answers 200, with the standard library's plain client: the
    poll of a start-up must not take CPU from the start it times (``httpx.get()`` makes a
    client and an SSL context each time: 60 ms of CPU a poll, most of a core)."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=2)
    try:
        connection.request("GET", parts.path)
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


LOGS: list[Path] = []
"""Where each server's stderr goes (a file: a pipe nobody reads could fill and block it)."""


@contextmanager
def process(
    command: list[str], ready_url: str, env: dict[str, str], cwd: Path = REPO
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` in ``cwd``; wait until ``ready_url`` answers 200; stop it on exit."""
    log = Path(tempfile.mkstemp(prefix="bench-", suffix=".log")[1])
    LOGS.append(log)
    with log.open("wb") as stderr:
        started = subprocess.Popen(
            command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        deadline = time.monotonic() + 120
        while not answers_200(ready_url):
            if started.poll() is not None or time.monotonic() > deadline:
                error = log.read_text(errors="replace")
                raise RuntimeError(f"{command[:4]} did not start:\n{error[-2000:]}")
            time.sleep(0.02)
        yield started
    finally:
        started.terminate()
        try:
            started.wait(timeout=20)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()


@contextmanager
def fake_llm(
    token_delay_ms: float = 0, timing_file: Path | None = None, tokens: int = 20
) -> Iterator[str]:
    """The fake LLM's base URL: each token an SSE event and a write of its own, as a
    real model server streams (also at 0 ms a token)."""
    port = free_port()
    command = [PYTHON, "-m", "tests.fakes.fake_llm", "--port", str(port), "--write-each-token"]
    command += ["--token-delay-ms", str(token_delay_ms), "--tokens", str(tokens)]
    if timing_file is not None:
        command += ["--timing-file", str(timing_file)]
    with process(command, f"http://127.0.0.1:{port}/health", ENV):
        yield f"http://127.0.0.1:{port}/v1"


def hub_home(root: Path, name: str, personas: int = 0) -> Path:
    """A directory for a hub to run in: ``personas/`` (see :func:`make_personas`), and its
    default ``./data`` once it runs."""
    home = root / name
    make_personas(home / "personas", personas)
    return home


@contextmanager
def hub(
    llm_url: str,
    home: Path,
    wrapper: tuple[str, ...] = (),
    settings: dict[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``persona-agent serve`` in ``home``, every setting at its default but the LLM's URL
    (and the port it listens on), and ``settings`` (``PERSONA_AGENT_*``) when given."""
    port = free_port()
    env = {**ENV, "PERSONA_AGENT_LLM_BASE_URL": llm_url, **(settings or {})}
    command = [*wrapper, PYTHON, "-m", "persona_agent.cli", "serve", "--port", str(port)]
    with process(command, f"http://127.0.0.1:{port}/healthz", env, cwd=home) as started:
        yield f"http://127.0.0.1:{port}", started


def socrates_prompt(root: Path) -> Path:
    """The system prompt the hub sends for Socrates, in a file for the like-for-like agent."""
    from persona_agent.personas.loader import load_persona_file
    from persona_agent.personas.prompt import render_system_prompt

    path = root / "socrates-prompt.txt"
    if not path.exists():
        persona = load_persona_file(REPO / "personas" / "socrates.yaml")
        path.write_text(render_system_prompt(persona), encoding="utf-8")
    return path


@contextmanager
def bare_agent(
    llm_url: str, root: Path, wrapper: tuple[str, ...] = (), lean: bool = False
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A like-for-like agent: the hub's call for Socrates (system prompt and model), made
    through one shared ``AsyncOpenAI`` to the fake LLM at ``llm_url``; the *streaming*
    one (an artifact update per token), or with ``lean`` the *lean* one (one artifact)."""
    port = free_port()
    command = [*wrapper, PYTHON, str(BENCH / "bare_agent.py"), "--port", str(port)]
    command += ["--llm", llm_url, "--model", MODEL, *(["--lean"] if lean else [])]
    command += ["--system-prompt-file", str(socrates_prompt(root))]
    ready = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    with process(command, ready, REFERENCE_ENV) as started:
        yield f"http://127.0.0.1:{port}", started


CHECKED = [0]
"""Answers the load generator checked, over the whole run (it fails the run on any error)."""


def load(url: str, *args: str, pin: tuple[str, ...] = ()) -> dict[str, Any]:
    """One run of the load generator, in its own process; its JSON summary. ``pin``: a
    command to run it under (``taskset -c 1``)."""
    return load_together([url], *args, pin=pin)[0]


def load_together(urls: list[str], *args: str, pin: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A load generator per URL, all at once (each in its own process); their summaries."""
    runs = [
        subprocess.Popen(
            [*pin, PYTHON, str(BENCH / "loadgen.py"), "--url", url, *args],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for url in urls
    ]
    summaries: list[dict[str, Any]] = []
    for run in runs:
        stdout, stderr = run.communicate()
        if run.returncode != 0 or not stdout.strip():
            raise RuntimeError(f"loadgen failed: {stderr[-2000:]}")
        summary: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
        if summary["errors"]:
            raise RuntimeError(f"loadgen saw errors: {summary['error_kinds']}\n{stderr[-1000:]}")
        CHECKED[0] += int(summary["checked"])
        summaries.append(summary)
    return summaries


PERSONA = """\
name: Persona {n}
description: Benchmark persona number {n}, a plain-spoken guide to load testing.
personal_background: >-
  Generated for the persona-count benchmark. It has a short background, a tone,
  two knowledge domains and one example exchange, like a small hand-written persona.
language_style:
  tone: plain
  characteristics: [short sentences]
knowledge_domains:
  Benchmarks: [load, latency]
  Operations: [memory, start-up]
interaction_samples:
  - user: How fast is it?
    assistant: Fast enough to measure.
"""
"""A generated persona: about 600 bytes of YAML (the bundled ones are 5-8 KB)."""


BUNDLED_COUNT = len(list((REPO / "personas").glob("*.yaml")))
"""The bundled personas (a panel among them), what a hub with no others serves."""


def make_personas(directory: Path, count: int) -> None:
    """``count`` small valid personas, ``p00000`` ... (the bundled ones when count is 0)."""
    directory.mkdir(parents=True)
    if count == 0:
        for path in (REPO / "personas").glob("*.yaml"):
            shutil.copy(path, directory)
        return
    for number in range(count):
        (directory / f"p{number:05d}.yaml").write_text(PERSONA.format(n=number))


def cpu_ms_per_request(summary: dict[str, Any]) -> float:
    """The server's CPU time per answered request, from the load generator's summary."""
    return float(summary["server_cpu_pct"]["server"]) * 10 / float(summary["rps"])


def median_ratio(pairs: list[tuple[float, float]]) -> float:
    return statistics.median(a / b for a, b in pairs)


def throughput_and_tail(rounds: int, window: str, root: Path) -> list[Row]:
    """Blocking sends at c=16: the hub against both like-for-like agents, the *lean* one (one
    artifact an answer) and the *streaming* one (an artifact update a token); c=64's tail."""
    sends: dict[str, list[float]] = {"hub": [], "lean": [], "streaming": []}
    cpu: dict[str, list[float]] = {"hub": [], "lean": [], "streaming": []}
    tails: list[tuple[float, float]] = []
    bare_tails: list[tuple[float, float]] = []
    with (
        fake_llm() as llm,
        hub(llm, hub_home(root, "hub-rps")) as (hub_url, hub_process),
        bare_agent(llm, root, lean=True) as (lean_url, lean_process),
        bare_agent(llm, root) as (bare_url, bare_process),
    ):
        hub_rpc = f"{hub_url}/a2a/socrates/"
        references = [
            ("lean", f"{lean_url}/", lean_process),
            ("streaming", f"{bare_url}/", bare_process),
        ]
        half = str(float(window) / 2)
        for round_ in range(rounds):
            # Hub, the agents, hub: half the hub's window on each side, so that a machine
            # whose speed drifts during the round weighs on all alike; the agents' order
            # alternates from round to round.
            order = references if round_ % 2 == 0 else references[::-1]
            runs = [("hub", hub_rpc, half, hub_process)]
            runs += [(name, url, window, started) for name, url, started in order]
            runs.append(("hub", hub_rpc, half, hub_process))
            done = [
                (
                    name,
                    load(
                        url,
                        "--mode",
                        "send",
                        "-c",
                        "16",
                        "-d",
                        length,
                        "--watch-pid",
                        f"server={started.pid}",
                    ),
                )
                for name, url, length, started in runs
            ]
            halves = [summary for name, summary in done if name == "hub"]
            hub_rps = sum(h["rps"] for h in halves) / 2
            sends["hub"].append(hub_rps)
            # CPU per request over both halves: each weighs by the requests it answered.
            cpu["hub"].append(sum(cpu_ms_per_request(h) * h["rps"] for h in halves) / (2 * hub_rps))
            for name, summary in done:
                if name != "hub":
                    sends[name].append(summary["rps"])
                    cpu[name].append(cpu_ms_per_request(summary))
            tail, bare_tail = (
                load(url, "--mode", "send", "-c", "64", "-d", window)
                for url in (hub_rpc, f"{bare_url}/")
            )
            tails.append((tail["latency_ms"]["p99"], tail["latency_ms"]["p50"]))
            bare_tails.append((bare_tail["latency_ms"]["p99"], bare_tail["latency_ms"]["p50"]))
            print(
                f"    round: hub {hub_rps:.1f} req/s, lean agent {sends['lean'][-1]} req/s, "
                f"streaming agent {sends['streaming'][-1]} req/s; c=64 p50/p99 "
                f"hub {tail['latency_ms']['p50']}/{tail['latency_ms']['p99']} ms, streaming agent "
                f"{bare_tail['latency_ms']['p50']}/{bare_tail['latency_ms']['p99']} ms",
                file=sys.stderr,
                flush=True,
            )
    lean = median_ratio(list(zip(sends["hub"], sends["lean"], strict=True)))
    streaming = median_ratio(list(zip(sends["hub"], sends["streaming"], strict=True)))
    tail_ratio = median_ratio(tails)
    rows = [
        Row(f"send c=16, {LABELS[name]} req/s (median)", statistics.median(v), "req/s")
        for name, v in sends.items()
    ]
    rows += [
        Row("send c=16, hub / lean agent", lean, "x", ">= 1.0", lean >= 1.0),
        Row("send c=16, hub / streaming agent", streaming, "x", ">= 1.2", streaming >= 1.2),
    ]
    # CPU per request, from /proc: steadier than req/s from run to run (no target).
    rows += [
        Row(f"send c=16, {LABELS[name]} CPU per request", statistics.median(v), "ms")
        for name, v in cpu.items()
    ]
    return [
        *rows,
        Row("send c=64, hub p50", statistics.median(p for _, p in tails), "ms"),
        Row("send c=64, hub p99 / p50", tail_ratio, "x", "<= 3", tail_ratio <= 3),
        Row("send c=64, streaming agent p50", statistics.median(p for _, p in bare_tails), "ms"),
        Row("send c=64, streaming agent p99 / p50", median_ratio(bare_tails), "x"),
    ]


LABELS = {
    "hub": "hub",
    "lean": "lean agent (one artifact)",
    "streaming": "streaming agent (a token an update)",
}
"""How the table names each server: which like-for-like agent is which."""


SLOW_TOKENS = 100
"""Tokens in each answer of the slow streams (2 s at 20 ms a token)."""


SLOW_CALLERS = 4
"""The slow streams come from this many callers (loopback addresses), 64 streams each: the
hub holds a caller to 256 open streams by default (``PERSONA_AGENT_MAX_STREAMS``), and a
closed loop of 256 from one caller would open its next stream a moment before the server
has closed the last."""


def fake_llm_chunks(llm_url: str) -> int:
    """The content chunks the fake LLM has streamed so far (its ``/health``)."""
    health = llm_url.removesuffix("/v1") + "/health"
    return int(httpx.get(health, timeout=10).json()["chunks"])


def slow_streams(rounds: int, window: float, root: Path, streams: int = 256) -> list[Row]:
    """``streams`` concurrent streaming sends, the model giving a token every 20 ms: the CPU
    each server spends a second of streaming (``/proc``, over the load generator's window)
    and a token it delivered (the words of answer text that reached the client in that
    window: the fake's tokens are words), rounds interleaved.

    Counted where the client is, not where the fake LLM writes: a server that falls
    behind holds a backlog in its socket buffers, and the fake then writes few tokens
    while the server still spends its CPU on those it read before; CPU over the tokens
    written would divide a backlog's CPU by the few tokens written meanwhile. The warm-up
    (``SLOW_WARMUP``) is long enough for each server to reach its steady rate (the load
    generator's words a second, second by second, are printed: a rising count would say
    otherwise)."""
    per: dict[str, list[tuple[float, float]]] = {"hub": [], "lean": [], "streaming": []}
    reached: dict[str, list[float]] = {"hub": [], "lean": [], "streaming": []}
    """Tokens a second delivered to the client by each server."""
    written: dict[str, list[float]] = {"hub": [], "lean": [], "streaming": []}
    """Tokens a second the fake wrote to each server (it serves one server at a time)."""
    with (
        fake_llm(20, tokens=SLOW_TOKENS) as llm,
        hub(llm, hub_home(root, "hub-slow")) as (hub_url, hub_process),
        bare_agent(llm, root, lean=True) as (lean_url, lean_process),
        bare_agent(llm, root) as (bare_url, bare_process),
    ):
        servers = [
            ("hub", f"{hub_url}/a2a/socrates/", hub_process),
            ("lean", f"{lean_url}/", lean_process),
            ("streaming", f"{bare_url}/", bare_process),
        ]
        for round_ in range(rounds):
            for name, url, started in servers if round_ % 2 == 0 else servers[::-1]:
                summary, fake_rate = _slow_run(url, started.pid, llm, streams, window)
                cpu = float(summary["server_cpu_pct"]["server"]) / 100  # CPU s a second
                rate = float(summary["words_per_s"])
                per[name].append((cpu, cpu / max(rate, 1e-9) * 1e6))
                reached[name].append(rate)
                written[name].append(fake_rate)
                print(
                    f"    {LABELS[name]}: {cpu:.2f} CPU s/s, {rate:,.0f} tokens/s delivered "
                    f"({fake_rate:,.0f}/s written by the fake), {per[name][-1][1]:.1f} µs CPU "
                    f"a token delivered; each second {summary['words_by_second']}; "
                    f"{summary['rps']} answers/s",
                    file=sys.stderr,
                    flush=True,
                )
    return _slow_rows(f"c={streams} streams, 20 ms a token", per, reached, written)


SLOW_WARMUP = 8.0
"""Seconds of slow streams before the window: four answers' time at 20 ms a token, and
long enough for a saturated server's answers to be spread out (measured: each server's
tokens a second are level from the window's first second)."""


def _slow_run(
    url: str, pid: int, llm: str, streams: int, window: float
) -> tuple[dict[str, Any], float]:
    """One load generator of ``streams`` streams on ``url``, server ``pid`` watched: its
    summary, and the tokens a second the fake LLM wrote in the same window."""
    command = [PYTHON, str(BENCH / "loadgen.py"), "--url", url, "--mode", "stream"]
    command += ["-c", str(streams), "-d", str(window), "--warmup", str(SLOW_WARMUP)]
    command += ["--watch-pid", f"server={pid}"]
    run = subprocess.Popen(
        [*command, "--timeout", "120", "--callers", str(SLOW_CALLERS)],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(SLOW_WARMUP)
    chunks0, at0 = fake_llm_chunks(llm), time.monotonic()
    time.sleep(window)
    chunks1, at1 = fake_llm_chunks(llm), time.monotonic()
    stdout, stderr = run.communicate()
    summary = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    # Answers longer than the window may all end after it (exit status 1): the figures
    # here count tokens, not answers.
    if not summary or summary["errors"]:
        raise RuntimeError(f"slow streams: {summary.get('error_kinds')} {stderr[-1000:]}")
    CHECKED[0] += int(summary["checked"])
    return summary, (chunks1 - chunks0) / (at1 - at0)


def _slow_rows(
    label: str,
    per: dict[str, list[tuple[float, float]]],
    reached: dict[str, list[float]],
    written: dict[str, list[float]],
) -> list[Row]:
    """The slow streams' rows: each server's medians (CPU a second, CPU a token delivered,
    tokens a second delivered and written by the fake), and the hub's CPU a token against
    each agent's."""
    rows: list[Row] = []
    for name, values in per.items():
        server = LABELS[name]
        rows.append(
            Row(f"{label}: {server} CPU s per s", statistics.median(v[0] for v in values), "s")
        )
        rows.append(
            Row(
                f"{label}: {server} CPU per token delivered",
                statistics.median(v[1] for v in values),
                "µs",
            )
        )
        rows.append(
            Row(
                f"{label}: tokens a second delivered by the {server}",
                statistics.median(reached[name]),
                "/s",
            )
        )
        rows.append(
            Row(
                f"{label}: tokens a second the fake wrote to the {server}",
                statistics.median(written[name]),
                "/s",
            )
        )
    ratio = median_ratio([(h[1], b[1]) for h, b in zip(per["hub"], per["streaming"], strict=True)])
    lean = median_ratio([(h[1], b[1]) for h, b in zip(per["hub"], per["lean"], strict=True)])
    return [
        *rows,
        Row(f"{label}: CPU per token, hub / streaming agent", ratio, "x", "<= 1.0", ratio <= 1.0),
        Row(f"{label}: CPU per token, hub / lean agent", lean, "x"),
    ]


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) of process ``pid`` so far, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def token_lags(root: Path, url: str, label: str, count: int) -> tuple[float, float, float]:
    """Streamed answers at concurrency 1 from ``url`` (its fake LLM logs to
    ``root/llm-times.tsv``): the median ms from the LLM's first token to the client's
    first answer text, the same for the last, and the text chunks per answer."""
    client_times = root / f"client-times-{label}.tsv"
    summary = load(
        url,
        *("--mode", "stream", "-c", "1", "--max-requests", str(count), "-d", "600"),
        *("--mark", "--timing-file", str(client_times), "--warmup", "0"),
    )
    llm_at = {
        fields[0]: (float(fields[1]), float(fields[2]))
        for fields in (
            line.split("\t") for line in (root / "llm-times.tsv").read_text().splitlines()
        )
    }
    firsts: list[float] = []
    lasts: list[float] = []
    for fields in (line.split("\t") for line in client_times.read_text().splitlines()):
        if fields[0] in llm_at:
            firsts.append((float(fields[1]) - llm_at[fields[0]][0]) * 1000)
            lasts.append((float(fields[2]) - llm_at[fields[0]][1]) * 1000)
    chunks = float(summary["text_chunks_per_answer"] or 0)
    return statistics.median(firsts), statistics.median(lasts), chunks


def streaming(root: Path, count: int) -> list[Row]:
    with (
        fake_llm(20, root / "llm-times.tsv") as llm,
        hub(llm, hub_home(root, "hub-stream")) as (url, _),
        bare_agent(llm, root) as (bare_url, _),
    ):
        first, last, chunks = token_lags(root, f"{url}/a2a/socrates/", "hub", count)
        bare_first, bare_last, _ = token_lags(root, f"{bare_url}/", "agent", count)
    # A fast model: 500 tokens at 1 ms each. What a streaming client receives per answer.
    with (
        fake_llm(1, tokens=500) as fast_llm,
        hub(fast_llm, hub_home(root, "hub-fast")) as (fast_url, _),
    ):
        fast = load(
            f"{fast_url}/a2a/socrates/",
            *("--mode", "stream", "-c", "1", "--max-requests", str(count), "-d", "600"),
        )
    events, size = fast["events_per_answer"], fast["bytes_per_answer"]
    return [
        Row("stream c=1, first text after LLM's first token", first, "ms", "<= 10", first <= 10),
        Row("stream c=1, agent: first text after LLM's first", bare_first, "ms"),
        Row("stream c=1, text chunks per 20-token answer", chunks, "", ">= 10", chunks >= 10),
        Row("stream c=1, last text after LLM's last token", last, "ms", "<= 10", last <= 10),
        Row("stream c=1, agent: last text after LLM's last", bare_last, "ms"),
        Row(
            "stream c=1, 500 tokens at 1 ms: SSE events per answer",
            events,
            "",
            "<= 100",
            events <= 100,
        ),
        Row("stream c=1, 500 tokens at 1 ms: bytes per answer", size, "B"),
    ]


def persona_count(root: Path, count: int, rounds: int, window: str) -> list[Row]:
    few, many = hub_home(root, "hub-few"), hub_home(root, "hub-many", count)
    with fake_llm() as llm:
        # References for the start-up figures: the same start with the bundled
        # personas, and the agent's (the SDK's and openai's imports and uvicorn alone).
        started = time.monotonic()
        with bare_agent(llm, root):
            bare_start = time.monotonic() - started
        started = time.monotonic()
        with hub(llm, few) as (_, small):
            few_start = time.monotonic() - started
            time.sleep(1)
            small_rss = rss_kib(small.pid)
        started = time.monotonic()
        with hub(llm, many) as (url, big):  # the first start: every file read, a new database
            first_start = time.monotonic() - started
            time.sleep(1)
            per_persona = (rss_kib(big.pid) - small_rss) * 1024 / (count - BUNDLED_COUNT) / 1000
            # The last persona added, through the REST API as an operator would.
            added = httpx.post(
                f"{url}/api/v1/personas",
                json={"id": "added-last", **yaml.safe_load(PERSONA.format(n="added last"))},
                timeout=30,
            )
            if added.status_code != 201:
                raise RuntimeError(f"adding a persona: HTTP {added.status_code} {added.text}")
            pairs: list[tuple[float, float]] = []
            # Both at once, 8 connections each: the same moments of the machine for both
            # (one after the other, its drift between two windows was most of the figure).
            for _ in range(rounds):
                first, last = load_together(
                    [f"{url}/a2a/p00000/", f"{url}/a2a/added-last/"],
                    *("--mode", "send", "-c", "8", "-d", window),
                )
                pairs.append((last["latency_ms"]["p50"], first["latency_ms"]["p50"]))
    drift = abs(median_ratio(pairs) - 1) * 100
    return [
        Row("start-up to ready: agent", bare_start, "s"),
        Row(f"start-up to ready: hub, {BUNDLED_COUNT} bundled personas", few_start, "s"),
        Row(f"{count:,} personas: first start-up", first_start, "s", "< 6", first_start < 6),
        Row(
            f"{count:,} personas: memory per persona", per_persona, "KB", "<= 10", per_persona <= 10
        ),
        Row("p50 to the last persona added vs the first", drift, "%", "<= 5", drift <= 5),
    ]


def rss_growth(url: str, pid: int, first: int, total: int) -> tuple[int, int]:
    """RSS (KiB) of ``pid`` after ``first`` blocking sends to ``url``, then after ``total``."""
    sends = ("--mode", "send", "-c", "16", "-d", "3600", "--warmup", "0")
    load(url, *sends, "--max-requests", str(first))
    after_first = rss_kib(pid)
    load(url, *sends, "--max-requests", str(total - first))
    return after_first, rss_kib(pid)


def memory(root: Path, first: int, total: int) -> list[Row]:
    with (
        fake_llm() as llm,
        hub(llm, hub_home(root, "hub-memory")) as (url, started),
        bare_agent(llm, root, lean=True) as (bare_url, bare),
    ):
        rpc = f"{url}/a2a/socrates/"
        # One answer each, so that both have made their LLM client.
        for each in (f"{bare_url}/", rpc):
            load(
                each,
                "--mode",
                "send",
                "-c",
                "1",
                "-d",
                "120",
                "--warmup",
                "0",
                "--max-requests",
                "1",
            )
        time.sleep(1)
        hub_idle, bare_idle = rss_kib(started.pid), rss_kib(bare.pid)
        hub_first, hub_total = rss_growth(rpc, started.pid, first, total)
        bare_first, bare_total = rss_growth(f"{bare_url}/", bare.pid, first, total)
    growth = (hub_total / hub_first - 1) * 100
    idle = hub_idle / bare_idle
    print(
        f"    RSS KiB: idle hub {hub_idle}, lean agent {bare_idle}; after {first:,} and {total:,} "
        f"requests hub {hub_first}, {hub_total}, agent {bare_first}, {bare_total}",
        file=sys.stderr,
        flush=True,
    )
    return [
        Row(f"RSS after {total:,} vs {first:,} requests", growth, "%", "<= 10", growth <= 10),
        Row(
            f"lean agent: RSS after {total:,} vs {first:,}",
            (bare_total / bare_first - 1) * 100,
            "%",
        ),
        Row("idle RSS, hub / lean agent", idle, "x", "<= 1.3", idle <= 1.3),
    ]


def instructions(root: Path, requests: int) -> list[Row]:
    """Instructions per blocking send, hub and agent, counted by callgrind.

    Unlike CPU time, a count that the machine's speed and neighbours do not move (within
    about 1 % from run to run): what the hub does beyond the agent, without what
    cache misses and a busy machine add on top. Each server runs under valgrind with
    instrumentation off until 100 warm-up requests are answered, then on for
    ``requests`` (concurrency 16); every thread is counted.
    """
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("    valgrind not found: instruction counts skipped", file=sys.stderr)
        return []

    def control(pid: int, *command: str) -> None:
        subprocess.run(["callgrind_control", *command, str(pid)], check=True, capture_output=True)

    def count(label: str, serve: Callable[[tuple[str, ...]], Any], path: str) -> float:
        out = root / f"callgrind-{label}.out"
        wrapper = ("valgrind", "--tool=callgrind", "--instr-atstart=no")
        with serve((*wrapper, f"--callgrind-out-file={out}")) as (url, started):
            sends = ("--mode", "send", "-c", "16", "-d", "3600", "--warmup", "0")
            load(url + path, *sends, "--max-requests", "100")
            control(started.pid, "-i", "on")
            load(url + path, *sends, "--max-requests", str(requests))
            control(started.pid, "-i", "off")
            control(started.pid, "-d")
        total = 0
        for dump in root.glob(f"callgrind-{label}.out*"):
            for line in dump.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    total += int(line.split()[1])
        return total / requests / 1e6

    home = hub_home(root, "hub-callgrind")
    with fake_llm() as llm:
        hub_count = count("hub", lambda w: hub(llm, home, w), "/a2a/socrates/")
        bare_count = count("bare", lambda w: bare_agent(llm, root, w), "/")
    return [
        Row("send c=16: instructions per request, hub (callgrind)", hub_count, "M"),
        Row("send c=16: instructions per request, agent", bare_count, "M"),
        Row("send c=16: instructions per request, agent / hub", bare_count / hub_count, "x"),
    ]


BENCH_KEY = "bench-key-0123456789abcdef"


def auth_cost(rounds: int, window: str, root: Path) -> list[Row]:
    """Send throughput at c=16 with API-key authentication on (A2A access
    ``authenticated``, each request with its key) against the hub at its defaults, rounds
    interleaved."""
    pairs: list[tuple[float, float]] = []
    keyed = {
        "PERSONA_AGENT_API_KEYS": BENCH_KEY,
        "PERSONA_AGENT_A2A_ACCESS": "authenticated",
        # A principal is held to the per-caller limits wherever it connects from (the open
        # hub's anonymous loopback client is not): off, so that both measure the same work.
        "PERSONA_AGENT_RATE_LIMIT": "0",
        "PERSONA_AGENT_MAX_RUNNING_TASKS": "0",
    }
    with (
        fake_llm() as llm,
        hub(llm, hub_home(root, "hub-open")) as (open_url, _),
        hub(llm, hub_home(root, "hub-keyed"), settings=keyed) as (keyed_url, _),
    ):
        header = ("--header", f"Authorization: Bearer {BENCH_KEY}")
        for _ in range(rounds):
            plain = load(f"{open_url}/a2a/socrates/", "--mode", "send", "-c", "16", "-d", window)
            auth = load(
                f"{keyed_url}/a2a/socrates/", "--mode", "send", "-c", "16", "-d", window, *header
            )
            pairs.append((auth["rps"], plain["rps"]))
            print(
                f"    round: open {plain['rps']} req/s, API key {auth['rps']} req/s",
                file=sys.stderr,
                flush=True,
            )
    ratio = median_ratio(pairs)
    return [
        Row(
            "send c=16, API-key auth req/s (median)",
            statistics.median(a for a, _ in pairs),
            "req/s",
        ),
        Row("send c=16, API-key auth / open", ratio, "x", ">= 0.9", ratio >= 0.9),
    ]


def observability_cost(rounds: int, window: str, root: Path) -> list[Row]:
    """Send throughput at c=16 of the hub at its defaults (metrics on, tracing off) against
    the hub with metrics off too, and with tracing on to an OTLP/HTTP receiver on this
    machine (the tests' own: tests/servers/otlp_receiver.py), rounds interleaved."""
    sys.path.insert(0, str(REPO))
    from tests.servers.otlp_receiver import OTLPReceiver

    rps: dict[str, list[float]] = {"default": [], "metrics off": [], "tracing on": []}
    with OTLPReceiver("http") as receiver:
        traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        with (
            fake_llm() as llm,
            hub(llm, hub_home(root, "hub-default")) as (default_url, _),
            hub(llm, hub_home(root, "hub-no-metrics"), settings=NO_METRICS) as (bare_url, _),
            hub(llm, hub_home(root, "hub-traced"), settings=traced) as (traced_url, _),
        ):
            urls = {"default": default_url, "metrics off": bare_url, "tracing on": traced_url}
            for round_ in range(rounds):
                order = list(urls.items())
                if round_ % 2:  # no hub always first
                    order.reverse()
                for name, url in order:
                    summary = load(
                        f"{url}/a2a/socrates/", "--mode", "send", "-c", "16", "-d", window
                    )
                    rps[name].append(summary["rps"])
                print(
                    "    round: " + ", ".join(f"{n} {v[-1]} req/s" for n, v in rps.items()),
                    file=sys.stderr,
                    flush=True,
                )
        spans = len(receiver.spans)
    metrics = median_ratio(list(zip(rps["default"], rps["metrics off"], strict=True)))
    tracing = median_ratio(list(zip(rps["tracing on"], rps["default"], strict=True)))
    return [
        Row("send c=16, metrics on / both off", metrics, "x", ">= 0.95", metrics >= 0.95),
        Row("send c=16, tracing on (OTLP/HTTP) / off", tracing, "x"),
        Row("spans received by the OTLP receiver", spans, ""),
    ]


NO_METRICS = {"PERSONA_AGENT_METRICS": "false"}


def panels(rounds: int, root: Path, quick: bool) -> list[Row]:
    """The panel figure: bench/panels.py (which imports this file as ``run``)."""
    import panels as part
    import run as twin

    rows = part.panels(rounds, root, quick) + part.panel_cancel(rounds, root, quick)
    CHECKED[0] += twin.CHECKED[0]
    LOGS.extend(twin.LOGS)
    return rows


def consult(rounds: int, root: Path, quick: bool) -> list[Row]:
    """The consultation figure: bench/consult.py (which imports this file as ``run``)."""
    import consult as part
    import run as twin

    rows = part.consult(rounds, root, quick)
    LOGS.extend(twin.LOGS)
    return rows


def replicas(rounds: int, window: str, root: Path, quick: bool) -> list[Row]:
    """The replica figures: bench/replicas.py (which imports this file as ``run``: its
    answers checked are added here)."""
    import replicas as part
    import run as twin

    rows = part.replicas(rounds, window, root, quick)
    CHECKED[0] += twin.CHECKED[0]
    LOGS.extend(twin.LOGS)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run, not a measurement")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--window",
        type=float,
        help="seconds a throughput or slow-stream run is measured (default: 10; 5 with "
        "--quick): longer on a machine so busy that answers take longer",
    )
    parser.add_argument("--personas", type=int, help="default: 10,000 (1,000 with --quick)")
    parser.add_argument(
        "--requests",
        type=int,
        help="memory figure: RSS after N requests vs after N/10 (default: 100,000; "
        "20,000 with --quick)",
    )
    parser.add_argument(
        "--no-callgrind",
        action="store_true",
        help="skip the instruction counts (valgrind; about 5 minutes)",
    )
    parser.add_argument(
        "--part",
        action="append",
        help="run only this part (repeatable): throughput and tail, instructions, streaming, "
        "slow streams, persona count, authentication, observability, memory, replicas, panels, "
        "consult",
    )
    args = parser.parse_args()
    rounds, window = (1, "5") if args.quick else (args.rounds, "10")
    if args.window:
        window = str(args.window)
    total = args.requests or (20_000 if args.quick else 100_000)
    first = total // 10
    count = args.personas or (1_000 if args.quick else 10_000)
    parts: list[tuple[str, Callable[[Path], list[Row]]]] = [
        ("throughput and tail", lambda root: throughput_and_tail(rounds, window, root)),
        ("streaming", lambda root: streaming(root, 20 if args.quick else 50)),
        ("slow streams", lambda root: slow_streams(rounds, float(window), root)),
        ("persona count", lambda root: persona_count(root, count, rounds, "5")),
        ("authentication", lambda root: auth_cost(rounds, window, root)),
        ("observability", lambda root: observability_cost(rounds, window, root)),
        ("memory", lambda root: memory(root, first, total)),
        ("replicas", lambda root: replicas(rounds, window, root, args.quick)),
        ("panels", lambda root: panels(rounds, root, args.quick)),
        ("consult", lambda root: consult(rounds, root, args.quick)),
    ]
    if args.part:
        parts = [(name, part) for name, part in parts if name in args.part]
    if not args.no_callgrind:
        requests = 100 if args.quick else 400
        parts.insert(1, ("instructions", lambda root: instructions(root, requests)))
    rows: list[Row] = []
    began = time.monotonic()
    finished = False
    try:
        with tempfile.TemporaryDirectory(prefix="persona-agent-bench-") as tmp:
            for name, part in parts:
                print(f"... {name}", file=sys.stderr, flush=True)
                done = part(Path(tmp))
                for row in done:
                    print(f"    {row.figure}: {row.value:,.2f} {row.unit}", file=sys.stderr)
                rows += done
        finished = True
    finally:
        for log in LOGS:
            if finished:
                log.unlink(missing_ok=True)
            else:  # what the servers said, for the failure
                print(f"    server log kept: {log}", file=sys.stderr)
    print(f"\n{'figure':<52} {'value':>12}  {'target':<9} result")
    for row in rows:
        value = f"{row.value:,.2f} {row.unit}".strip()
        result = ("PASS" if row.ok else "FAIL") if row.target else ""
        print(f"{row.figure:<52} {value:>12}  {row.target:<9} {result}")
    print(
        f"\n{CHECKED[0]:,} answers checked, no errors; {rounds} round(s); "
        f"{(time.monotonic() - began) / 60:.1f} min; {os.cpu_count()} cores; "
        f"load average {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M')}"
    )
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
