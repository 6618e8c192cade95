"""The consultation figure of the benchmark (issue 25): a consult adds at most 2 ms over the
consulted persona's own answer.

Run by ``bench/run.py`` (part ``consult``; ``--part consult`` runs it alone). The hub runs at
its defaults with the bundled personas and one more that may consult Socrates; the fake LLM
answers at once (20 tokens), and calls ``consult__socrates`` when the message holds
``[[consult:socrates]]``. Each sample times a blocking SendMessage to Socrates (his own
answer, over HTTP: the client's time), then sends a message to the asking persona and reads
how long its consultation took as the asking persona saw it (the ``durationMs`` of the
``tool-result`` status update: the consulted task from its creation to its end, its
streamed progress relayed). The figure is the difference of the medians.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # persona_agent

from run import Row, fake_llm, hub, hub_home

ASKER = """\
name: Bench Asker
description: A persona who consults Socrates, for the benchmark.
personal_background: It asks Socrates.
language_style:
  tone: plain
consult: [socrates]
"""
TARGET_MS = 2.0


def message(text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def rpc(method: str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message(text)}}


def answer_alone(http: httpx.Client, url: str, text: str) -> float:
    """Seconds to Socrates's own answer (a blocking SendMessage)."""
    started = time.monotonic()
    response = http.post(url, json=rpc("SendMessage", text), headers={"A2A-Version": "1.0"})
    took = time.monotonic() - started
    response.raise_for_status()
    state = response.json()["result"]["task"]["status"]["state"]
    if state != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"Socrates's task ended {state}")
    return took


def consultation(http: httpx.Client, url: str, text: str) -> float:
    """Seconds the consultation took, as the asking persona reports it."""
    body = rpc("SendStreamingMessage", text)
    took: float | None = None
    last_state = ""
    with http.stream("POST", url, json=body, headers={"A2A-Version": "1.0"}) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            update = json.loads(line[5:])["result"].get("statusUpdate")
            if update is None:
                continue
            last_state = update["status"]["state"]
            for part in update["status"].get("message", {}).get("parts", []):
                data = part.get("data", {})
                if data.get("kind") == "tool-result" and data.get("tool") == "consult__socrates":
                    if data.get("isError"):
                        raise RuntimeError(f"the consultation failed: {data.get('result')}")
                    took = data["durationMs"] / 1000
    if last_state != "TASK_STATE_COMPLETED" or took is None:
        raise RuntimeError(f"the consultation did not complete (last state {last_state})")
    return took


def consult(rounds: int, root: Path, quick: bool) -> list[Row]:
    samples = 20 if quick else 100 * rounds
    home = hub_home(root, "hub-consult")
    (home / "personas" / "bench-asker.yaml").write_text(ASKER, encoding="utf-8")
    alone: list[float] = []
    consulted: list[float] = []
    with (
        fake_llm(0, tokens=20) as llm,
        hub(llm, home) as (url, _started),
        httpx.Client(timeout=60) as http,
    ):
        socrates, asker = f"{url}/a2a/socrates/", f"{url}/a2a/bench-asker/"
        answer_alone(http, socrates, "Warm up.")
        consultation(http, asker, "[[consult:socrates]] Warm up.")
        for number in range(samples):
            alone.append(answer_alone(http, socrates, f"Question {number}."))
            consulted.append(consultation(http, asker, f"[[consult:socrates]] Question {number}."))
    added = (statistics.median(consulted) - statistics.median(alone)) * 1000
    return [
        Row("Socrates's own answer, over HTTP (median)", statistics.median(alone) * 1000, "ms"),
        Row("the same as a consultation (median)", statistics.median(consulted) * 1000, "ms"),
        Row(
            "a consultation's added time",
            added,
            "ms",
            f"<= {TARGET_MS:g} ms",
            added <= TARGET_MS,
        ),
    ]
