"""The embedded model's server against the binding it replaced, side by side (issue 49
item 6): ``local_model.py --binding-python PYTHON`` runs this.

The old path as it shipped: ``llama-cpp-python`` 0.3.36 in the hub's process, one generation
at a time (a FIFO lock, a worker thread), every core, OpenMP as the library leaves it
(threads that spin while they wait), the persona prefixes kept as KV snapshots in memory:
the ``LocalBackend`` of the commit before the switch (``OLD_COMMIT``), run on a Python that
has the binding (a throwaway venv, bench/README.md says how to build it) with the project's
other packages appended. The new path: today's ``LocalBackend`` (llama.cpp's server in the
process, reached through the openai backend), at its defaults. Each runs in a process of
its own (``local_engine.py``) on the same GGUF, the same bundled personas and questions, the
same seed, the answer cap and the context the hub uses; the processes' RSS and PSS are
comparable because each holds its engine and nothing else of the hub.

Each round runs both engines, the order alternating (old, new; new, old; ...), each twice:
a fresh process (memory at rest, cold, second message, persona read, four at once, memory
after) and a restarted one (binding: reads the prompt again; server: restores the saved
prefixes, as the hub's warm-up does). Prints each round's figures with the load average,
then the medians over the rounds with their spread, the ratios and the issue's targets.
``--binding-passive`` adds the binding with ``OMP_WAIT_POLICY=passive``, ``--server-active``
the server with ``OMP_WAIT_POLICY=active`` (OpenMP's wait decides much: docs/local-model.md).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OLD_COMMIT = "430774744ee54a305b6f5c14847e0120e4b53f5a"  # dc7f2c1^: the last on the binding
MB = 1024 * 1024


@dataclass
class Engine:
    """How to start one engine's process, and the figures of its rounds."""

    name: str
    python: str
    src: Path
    site: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    saves_slots: bool = False
    rounds: list[dict[str, Any]] = field(default_factory=list)


def old_tree(scratch: Path) -> Path:
    """``OLD_COMMIT``'s ``src`` unpacked under ``scratch``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", OLD_COMMIT, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
    return scratch / "src"


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment without the developer's hub, OpenMP and llama settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PERSONA_AGENT_", "OMP_", "LLAMA_", "GGML_", "VIRTUAL_ENV"))
    }
    env.update(extra)
    return env


def run_engine(engine: Engine, phase: str, args: Any, slot_dir: Path, log: Path) -> dict[str, Any]:
    """One process of ``engine`` in ``phase``; its JSON figures."""
    command = [
        engine.python,
        str(REPO / "bench" / "local_engine.py"),
        "--src", str(engine.src),
        "--personas", str(REPO / "personas"),
        "--model-dir", str(args.model_dir),
        "--phase", phase,
        "--max-tokens", str(args.max_tokens),
        "--concurrent", str(args.concurrent),
    ]  # fmt: skip
    if engine.site is not None:
        command += ["--site", str(engine.site)]
    if engine.saves_slots:  # the server: its slot files, and the settings tried
        command += ["--slot-dir", str(slot_dir)]
        for option, value in (("--threads", args.threads), ("--slots", args.slots)):
            if value is not None:
                command += [option, str(value)]
    with log.open("a") as errors:
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=errors, text=True, env=clean_env(engine.env)
        )
    if done.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        sys.exit(f"{tail}\n{engine.name} {phase} failed ({done.returncode})")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def median_of(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# (label, unit, figure of one round, lower is better)
FIGURES: list[tuple[str, str, Callable[[dict[str, Any]], float], bool]] = [
    ("new conversation, cold: first text", "ms", lambda r: median_of(r["cold_first"]) * 1e3, True),
    ("second message: first text", "ms", lambda r: median_of(r["second_first"]) * 1e3, True),
    ("new conversation, persona read", "ms", lambda r: median_of(r["read_first"]) * 1e3, True),
    ("after a restart: first text", "ms", lambda r: median_of(r["restart_first"]) * 1e3, True),
    ("one conversation: tokens/s", "tok/s", lambda r: r["one_speed"], False),
    ("four at once: tokens/s each", "tok/s", lambda r: median_of(r["many_speeds"]), False),
    ("four at once: aggregate tokens/s", "tok/s", lambda r: r["many_aggregate"], False),
    ("four at once: first text, slowest", "ms", lambda r: max(r["many_first"]) * 1e3, True),
    ("CPU per token (conversations)", "ms", lambda r: r["cpu_seconds"] / r["tokens"] * 1e3, True),
    ("RSS at rest, model loaded", "MB", lambda r: r["rest"]["rss"] / MB, True),
    ("PSS at rest", "MB", lambda r: r["rest"]["pss"] / MB, True),
    ("RSS after the run", "MB", lambda r: r["after"]["rss"] / MB, True),
    ("PSS after the run", "MB", lambda r: r["after"]["pss"] / MB, True),
    ("peak RSS", "MB", lambda r: r["after"]["peak"] / MB, True),
    ("RSS after a restart, five answers", "MB", lambda r: r["restart_after"]["rss"] / MB, True),
]

# (figure label, the new engine's limit against the old's value)
TARGETS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "one conversation: tokens/s": ("≥ 0.9 × today", lambda new, old: new >= 0.9 * old),
    "new conversation, cold: first text": ("≤ 1.1 × today", lambda new, old: new <= 1.1 * old),
    "second message: first text": ("≤ 1.1 × today", lambda new, old: new <= 1.1 * old),
    "after a restart: first text": ("≤ 1.1 × today", lambda new, old: new <= 1.1 * old),
    "four at once: aggregate tokens/s": ("≥ 2 × today", lambda new, old: new >= 2 * old),
    "RSS at rest, model loaded": ("≤ 1.1 × today", lambda new, old: new <= 1.1 * old),
    "RSS after the run": ("≤ 1.1 × today", lambda new, old: new <= 1.1 * old),
}


def round_line(engine: Engine, figures: dict[str, Any]) -> str:
    """One round of one engine, every figure, with the load average."""
    parts = [f"{label} {fn(figures):.1f}" for label, _, fn, _ in FIGURES]
    load = f"load {figures['load_before']:.1f} → {figures['restart_load_after']:.1f}"
    return f"  {engine.name:<16} {load}: " + "; ".join(parts)


def summary(engines: list[Engine]) -> None:
    """Medians over the rounds, their spread, the ratio new/old and the targets."""
    old, new = engines[0], engines[-1]
    names = " | ".join(e.name for e in engines)
    print(f"\n| figure | {names} | {new.name} / {old.name} | target |")
    print("|---" * (len(engines) + 3) + "|")
    for label, unit, fn, _ in FIGURES:
        cells, medians = [], []
        for engine in engines:
            values = [fn(r) for r in engine.rounds]
            medians.append(median_of(values))
            each = ", ".join(f"{v:.0f}" if unit in ("ms", "MB") else f"{v:.1f}" for v in values)
            shown = f"{medians[-1]:.0f}" if unit in ("ms", "MB") else f"{medians[-1]:.1f}"
            cells.append(f"{shown} {unit} ({each})")
        ratio = medians[-1] / medians[0] if medians[0] else float("nan")
        target = ""
        if label in TARGETS:
            text, met = TARGETS[label]
            target = f"{text}: {'met' if met(medians[-1], medians[0]) else 'NOT met'}"
        print(f"| {label} | {' | '.join(cells)} | {ratio:.2f} | {target} |")
    loads = [r["load_before"] for e in engines for r in e.rounds]
    loads += [r["restart_load_after"] for e in engines for r in e.rounds]
    print(f"\nload average over the runs: {min(loads):.1f} to {max(loads):.1f}")


def against_binding(args: Any) -> None:
    """Rounds of the old binding and today's server, alternating; the tables."""
    site = Path(sysconfig.get_paths()["purelib"])
    with tempfile.TemporaryDirectory(prefix="local-binding-") as scratch_dir:
        scratch = Path(scratch_dir)
        src = args.binding_src or old_tree(scratch)
        engines = [Engine("binding", args.binding_python, src, site=site)]
        if args.binding_passive:
            env = {"OMP_WAIT_POLICY": "passive"}
            engines.append(Engine("binding, passive", args.binding_python, src, site, env))
        if args.server_active:
            active = {"OMP_WAIT_POLICY": "active"}
            engines.append(
                Engine("server, active", sys.executable, REPO / "src", None, active, True)
            )
        engines.append(Engine("server", sys.executable, REPO / "src", saves_slots=True))
        log = scratch / "engines.log"
        for round_ in range(args.rounds):
            order = engines if round_ % 2 == 0 else engines[::-1]
            print(f"round {round_ + 1}", flush=True)
            for engine in order:
                slots = scratch / f"slots-{round_}"
                slots.mkdir(exist_ok=True)
                figures = run_engine(engine, "fresh", args, slots, log)
                restart = run_engine(engine, "restart", args, slots, log)
                figures["restart_first"] = restart["restart_first"]
                figures["restart_after"] = restart["after"]
                figures["restart_load_after"] = restart["load_after"]
                engine.rounds.append(figures)
                print(round_line(engine, figures), flush=True)
        summary(engines)
