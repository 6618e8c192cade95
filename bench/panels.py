"""The panel figure of the benchmark (issue 25): a broadcast panel of five answers in at most
1.2 times the time of its slowest member.

Run by ``bench/run.py`` (part ``panels``; ``--part panels`` runs it alone). The hub runs at
its defaults with the bundled personas and a broadcast panel of five of them; the fake LLM
answers 20 tokens, 20 ms each (about 0.4 s, a slow model as a panel would face). Each
sample times a blocking SendMessage to each member alone, one after the other, then one to
the panel, which asks all five at once: the ratio of the panel's time to the slowest
member's of the same sample; the figure is the median ratio.

And the panel's cancel (the bound a test once asserted, issue 53): a streamed send to the
panel, the fake LLM at a token a second, canceled once every member has begun; the time
from the cancel's answer until every member's own task reads canceled (GetTask, polled),
the median of the samples (target 1 s).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # persona_agent

from run import CHECKED, Row, fake_llm, hub, hub_home

MEMBERS = ["albert-einstein", "marie-curie", "charles-darwin", "socrates", "ada-lovelace"]
PANEL = """\
name: Bench Panel
description: Five bundled personas answering at once, for the benchmark.
panel:
  mode: broadcast
  members: [{members}]
"""
TARGET = 1.2
CANCEL_TARGET = 1.0
"""Seconds from a panel's cancel until every member's task is canceled."""


def cpu_seconds(pid: int) -> float:
    """The CPU time ``pid`` has used (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send(http: httpx.Client, url: str, text: str) -> tuple[float, dict[str, Any]]:
    """A blocking JSON-RPC SendMessage to ``url``: seconds to the answer, and the task."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            }
        },
    }
    started = time.monotonic()
    response = http.post(url, json=body, headers={"A2A-Version": "1.0"})
    took = time.monotonic() - started
    response.raise_for_status()
    task: dict[str, Any] = response.json()["result"]["task"]
    state = task["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"{url}: the task ended {state}: {task['status']}")
    CHECKED[0] += 1
    return took, task


def panels(rounds: int, root: Path, quick: bool) -> list[Row]:
    samples = 3 if quick else 4 * rounds
    home = hub_home(root, "hub-panels")
    panel = PANEL.format(members=", ".join(MEMBERS))
    (home / "personas" / "bench-panel.yaml").write_text(panel, encoding="utf-8")
    ratios: list[float] = []
    slowest: list[float] = []
    whole: list[float] = []
    cpu: list[tuple[float, float]] = []
    with (
        fake_llm(20, tokens=20) as llm,
        hub(llm, home) as (url, started),
        httpx.Client(timeout=60) as http,
    ):
        send(http, f"{url}/a2a/bench-panel/", "Warm up.")  # every member's first call made
        for number in range(samples):
            before = cpu_seconds(started.pid)
            alone = max(
                send(http, f"{url}/a2a/{member}/", f"Question {number}.")[0] for member in MEMBERS
            )
            between = cpu_seconds(started.pid)
            together, task = send(http, f"{url}/a2a/bench-panel/", f"Question {number}.")
            cpu.append(((between - before) / len(MEMBERS), cpu_seconds(started.pid) - between))
            answers = [
                a for a in task.get("artifacts", []) if "".join(p["text"] for p in a["parts"])
            ]
            if len(answers) != len(MEMBERS):
                raise RuntimeError(f"the panel gave {len(answers)} answers, not {len(MEMBERS)}")
            ratios.append(together / alone)
            slowest.append(alone)
            whole.append(together)
            print(
                f"    sample: slowest member {alone * 1000:.0f} ms, panel of "
                f"{len(MEMBERS)} {together * 1000:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    ratio = statistics.median(ratios)
    return [
        Row("panel of 5: slowest member alone (median)", statistics.median(slowest) * 1000, "ms"),
        Row("panel of 5, broadcast (median)", statistics.median(whole) * 1000, "ms"),
        # CPU from /proc: what a busy machine moves least (no target).
        Row("hub CPU per member answer", statistics.median(m for m, _ in cpu) * 1000, "ms"),
        Row(
            "hub CPU per panel answer (5 members)",
            statistics.median(p for _, p in cpu) * 1000,
            "ms",
        ),
        Row(
            "panel of 5 / its slowest member",
            ratio,
            "x",
            f"<= {TARGET}",
            ratio <= TARGET,
        ),
    ]


def rpc(http: httpx.Client, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = http.post(url, json=body, headers={"A2A-Version": "1.0"})
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    if "error" in answer:
        raise RuntimeError(f"{method} {url}: {answer['error']}")
    return answer["result"]  # type: ignore[no-any-return]


def begun(http: httpx.Client, url: str, text: str) -> tuple[str, dict[str, str]]:
    """A streamed send to the panel, read until every member has begun: the panel's task
    and each member's (the ``panel-turn`` statuses)."""
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    body["params"] = {"message": message}
    members: dict[str, str] = {}
    panel = ""
    headers = {"A2A-Version": "1.0"}
    with http.stream("POST", f"{url}/a2a/bench-panel/", json=body, headers=headers) as stream:
        for line in stream.iter_lines():
            if not line.startswith("data:"):
                continue
            result = json.loads(line.removeprefix("data:"))["result"]
            update = result.get("statusUpdate") or {}
            panel = update.get("taskId", panel) or result.get("task", {}).get("id", panel)
            for part in update.get("status", {}).get("message", {}).get("parts", []):
                data = part.get("data")
                if isinstance(data, dict) and data.get("kind") == "panel-turn":
                    members[str(data["member"])] = str(data["taskId"])
            if len(members) == len(MEMBERS):
                return panel, members
    raise RuntimeError(f"the panel's stream ended with {len(members)} members begun")


def cancel_sample(http: httpx.Client, url: str, number: int) -> float:
    """Seconds from the panel's cancel until every member's task reads canceled."""
    panel, members = begun(http, url, f"Talk among yourselves {number}.")
    canceled = rpc(http, f"{url}/a2a/bench-panel/", "CancelTask", {"id": panel})
    started = time.monotonic()
    if canceled["status"]["state"] != "TASK_STATE_CANCELED":
        raise RuntimeError(f"the panel's cancel answered {canceled['status']}")
    waiting = dict(members)
    while waiting:
        for member, task_id in list(waiting.items()):
            task = rpc(http, f"{url}/a2a/{member}/", "GetTask", {"id": task_id})
            if task["status"]["state"] == "TASK_STATE_CANCELED":
                del waiting[member]
        if time.monotonic() - started > 60:
            raise RuntimeError(f"members not canceled after 60 s: {sorted(waiting)}")
    CHECKED[0] += 1
    return time.monotonic() - started


def panel_cancel(rounds: int, root: Path, quick: bool) -> list[Row]:
    samples = 3 if quick else 2 * rounds
    home = hub_home(root, "hub-panel-cancel")
    panel = PANEL.format(members=", ".join(MEMBERS))
    (home / "personas" / "bench-panel.yaml").write_text(panel, encoding="utf-8")
    took: list[float] = []
    with (
        fake_llm(1000, tokens=20) as llm,  # a token a second: every member is mid-answer
        hub(llm, home) as (url, _started),
        httpx.Client(timeout=60) as http,
    ):
        for number in range(samples):
            took.append(cancel_sample(http, url, number))
            print(f"    sample: members canceled {took[-1] * 1000:.0f} ms after", file=sys.stderr)
    median = statistics.median(took)
    return [
        Row(
            "panel of 5: its members canceled after its cancel",
            median * 1000,
            "ms",
            f"<= {CANCEL_TARGET * 1000:.0f}",
            median <= CANCEL_TARGET,
        )
    ]
