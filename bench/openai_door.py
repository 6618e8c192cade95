"""The OpenAI-compatible door's cost (issue 51): the hub's CPU a chat completion against its
CPU an A2A ``SendMessage`` to the same persona (target <= 1.1x).

``uv run python bench/openai_door.py [--rounds 10] [--block 50]``: the hub at its defaults
(``persona-agent serve``, the bundled personas), the fake LLM answering at once (20
tokens); sequential requests over raw HTTP (one keep-alive client), in blocks that
alternate: ``--block`` blocking A2A ``SendMessage`` calls to Socrates over JSON-RPC, then
as many non-streamed ``POST /v1/chat/completions`` with ``model: socrates`` (one user
message), for ``--rounds`` rounds. The hub process's CPU (``/proc``: user + system) is read
around each block; the figure is each path's CPU a request over every block, and their
ratio (the median of the rounds' ratios too, steadier on a busy machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # persona_agent, tests

from run import Row, fake_llm, hub, hub_home

TARGET = 1.1
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def a2a_send(http: httpx.Client, url: str, number: int) -> None:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": f"Question {number}."}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    response = http.post(f"{url}/a2a/socrates/", json=body, headers={"A2A-Version": "1.0"})
    state = response.json()["result"]["task"]["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"Socrates's task ended {state}")


def completion(http: httpx.Client, url: str, number: int) -> None:
    body = {"model": "socrates", "messages": [{"role": "user", "content": f"Question {number}."}]}
    response = http.post(f"{url}/v1/chat/completions", json=body)
    if response.status_code != 200 or not response.json()["choices"][0]["message"]["content"]:
        raise RuntimeError(f"the chat completion failed: {response.text[:300]}")


def block(pid: int, call: Callable[[int], None], count: int) -> float:
    """CPU seconds the hub spent on ``count`` calls."""
    before = cpu_seconds(pid)
    for number in range(count):
        call(number)
    return cpu_seconds(pid) - before


def measure(root: Path, rounds: int, size: int) -> list[Row]:
    a2a_cpu: list[float] = []
    door_cpu: list[float] = []
    with (
        fake_llm(0, tokens=20) as llm,
        hub(llm, hub_home(root, "hub-openai")) as (url, started),
        httpx.Client(timeout=60) as http,
    ):
        pid = started.pid

        def send(number: int) -> None:
            a2a_send(http, url, number)

        def complete(number: int) -> None:
            completion(http, url, number)

        block(pid, send, 20)  # warm-up
        block(pid, complete, 20)
        for _ in range(rounds):
            a2a_cpu.append(block(pid, send, size))
            door_cpu.append(block(pid, complete, size))
    per_a2a = sum(a2a_cpu) / (rounds * size) * 1000
    per_door = sum(door_cpu) / (rounds * size) * 1000
    ratios = [door / a2a for door, a2a in zip(door_cpu, a2a_cpu, strict=True) if a2a > 0]
    ratio = per_door / per_a2a
    return [
        Row("A2A SendMessage to Socrates, hub CPU a request", per_a2a, "ms"),
        Row("/v1/chat/completions (socrates), hub CPU a request", per_door, "ms"),
        Row("the door's CPU over A2A's", ratio, "x", f"<= {TARGET:g}x", ratio <= TARGET),
        Row("the door's CPU over A2A's (median of rounds)", statistics.median(ratios), "x"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--block", type=int, default=50, help="requests a block")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-openai-") as root:
        rows = measure(Path(root), args.rounds, args.block)
    for row in rows:
        mark = "" if not row.target else ("  ok" if row.ok else "  MISSED")
        target = f"  (target {row.target})" if row.target else ""
        print(f"{row.figure:55} {row.value:10.2f} {row.unit}{target}{mark}")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
