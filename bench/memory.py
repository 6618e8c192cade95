"""Memory's figures (issue 36): does a persona find what a caller told it long ago, and
what does remembering cost a turn, the hub's memory and its throughput.

    python bench/memory.py                        # every part, the default embedder
    python bench/memory.py --embeddings wordllama # another embedder
    python bench/memory.py --part recall --part cost

Parts, each against the hub in its default configuration with memory on
(``PERSONA_AGENT_MEMORY=on``), as a process of its own (``persona-agent serve``):

- ``recall``: one caller (an API key) has a scripted 300-turn conversation over A2A
  (JSON-RPC blocking sends): 50 facts in the first 200 turns, 50 turns of small talk,
  then 50 questions, each asking a fact back in other words ("What is the name of my
  pet?" for "My dog is called Biscuit."). The history window (50 messages) holds none of
  the facts by then. The same 50 questions then open a new conversation of the same
  caller, and a conversation of another caller. A fact is recalled when the prompt the
  model received (the recording fake LLM, in this process) holds it; a leak is any fact
  in any prompt of the other caller. Targets: >= 90 % recalled, 0 leaks.
- ``cost``: the added time of a turn (recall and keep) with 10,000 remembered messages
  of the caller, on the hub's database (SQLite; ``--postgres URL`` for PostgreSQL too),
  through the memory's own interface (``PersonaMemory``), median of 200 turns. Target
  <= 30 ms.
- ``rss``: the hub's RSS after 300 blocking sends (c=4, the model loaded), memory on
  against off. Target: <= 50 MB more.
- ``throughput``: blocking sends at c=16 (``bench/loadgen.py``), memory on against off,
  rounds interleaved. Target >= 0.8x. The load generator's callers are anonymous: each
  send is a new conversation, so each turn embeds, searches (an empty scope) and keeps.

Prints each figure against its target; exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # persona_agent, tests

from memory_embeddings import FACTS, FILLER
from run import Row, fake_llm, hub, hub_home, load, rss_kib

from persona_agent.settings import Settings
from tests.fakes.fake_llm import FakeLLM, Reply

DEFAULT_EMBEDDINGS = Settings.model_fields["memory_embeddings"].default

KEYS = {"alice": "alice-bench-key-0123456789", "bob": "bob-bench-key-0123456789ab"}
REPLIES = ["I see.", "Tell me more.", "Interesting.", "Go on.", "How so?", "Noted."]


def settings_of(embeddings: str, memory: bool = True) -> dict[str, str]:
    return {
        "PERSONA_AGENT_MEMORY": "on" if memory else "off",
        "PERSONA_AGENT_MEMORY_EMBEDDINGS": embeddings,
        "PERSONA_AGENT_API_KEYS": ",".join(KEYS.values()),
    }


class Caller:
    """One caller of Socrates over A2A JSON-RPC (blocking sends)."""

    def __init__(self, url: str, key: str) -> None:
        self.rpc = f"{url}/a2a/socrates/"
        self.http = httpx.Client(
            headers={"Authorization": f"Bearer {key}", "A2A-Version": "1.0"}, timeout=60
        )

    def send(self, text: str, context: str | None = None) -> str:
        """Send ``text`` (in ``context``, or a new conversation); the conversation's id."""
        message: dict[str, Any] = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        if context:
            message["contextId"] = context
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        answer = self.http.post(self.rpc, json=body).json()
        task = answer["result"]["task"]
        if task["status"]["state"] != "TASK_STATE_COMPLETED":
            raise RuntimeError(f"a turn did not complete: {json.dumps(answer)[:500]}")
        return str(task["contextId"])


def conversation() -> list[str]:
    """300 turns: the 50 facts among 150 turns of small talk (the first 200), 50 more turns
    of small talk (the window, 25 turns, moves past the last fact), then the questions."""
    turns: list[str] = []
    for index, (fact, _) in enumerate(FACTS):
        turns.append(fact)
        turns += [f"{FILLER[(index * 3 + k) % len(FILLER)]} ({index}.{k})" for k in range(3)]
    turns += [f"{FILLER[k % len(FILLER)]} (later {k})" for k in range(50)]
    return turns


def found(llm: FakeLLM, fact: str) -> bool:
    """Whether the last prompt's system message holds ``fact`` (what memory brought)."""
    return fact in str(llm.requests[-1]["messages"][0]["content"])


def recall(root: Path, embeddings: str) -> list[Row]:
    replies = iter(range(1 << 30))

    def reply(_body: dict[str, Any]) -> Reply:
        return Reply(REPLIES[next(replies) % len(REPLIES)])

    with (
        FakeLLM(default=reply) as llm,
        hub(
            llm.base_url,
            hub_home(root, f"hub-recall-{embeddings}"),
            settings=settings_of(embeddings),
        ) as (url, _),
    ):
        alice, bob = Caller(url, KEYS["alice"]), Caller(url, KEYS["bob"])
        context = None
        started = time.perf_counter()
        for text in conversation():
            context = alice.send(text, context)
        same = new = 0
        for fact, question in FACTS:
            context = alice.send(question, context)
            same += found(llm, fact)
        turns = len(conversation()) + len(FACTS)
        elapsed = time.perf_counter() - started
        fresh = None
        for fact, question in FACTS:
            fresh = alice.send(question, fresh)
            new += found(llm, fact)
        llm.reset()
        other = None
        for _, question in FACTS:
            other = bob.send(question, other)
        leaks = sum(fact in json.dumps(request) for request in llm.requests for fact, _ in FACTS)
    total = len(FACTS)
    print(
        f"    recall ({embeddings}): {turns} turns in {elapsed:.1f} s; same conversation "
        f"{same}/{total}, new conversation {new}/{total}, other caller's leaks {leaks}",
        file=sys.stderr,
        flush=True,
    )
    both = 100 * (same + new) / (2 * total)
    return [
        Row(f"recall, same conversation ({embeddings})", 100 * same / total, "%"),
        Row(f"recall, new conversation ({embeddings})", 100 * new / total, "%"),
        Row(f"recall of planted facts ({embeddings})", both, "%", ">= 90", both >= 90),
        Row(f"facts leaked to another caller ({embeddings})", leaks, "", "0", leaks == 0),
    ]


def cost(root: Path, embeddings: str, postgres: str | None) -> list[Row]:
    rows = [_cost("SQLite", f"sqlite+aiosqlite:///{root / 'cost.db'}", embeddings)]
    if postgres:
        rows.append(_cost("PostgreSQL", postgres, embeddings))
    return rows


def _cost(label: str, url: str, embeddings: str) -> Row:
    added, first = asyncio.run(_turns(url, embeddings))
    print(
        f"    cost ({embeddings}, {label}): first search {first:.0f} ms (the scope read), then "
        f"median {added:.1f} ms a turn",
        file=sys.stderr,
        flush=True,
    )
    return Row(
        f"added time a turn, 10,000 remembered ({embeddings}, {label})",
        added,
        "ms",
        "<= 30",
        added <= 30,
    )


async def _turns(url: str, embeddings: str, remembered: int = 10_000) -> tuple[float, float]:
    """The median time of recall + keep with ``remembered`` messages, and the first's."""
    from persona_agent.db import GroupCommitWriter, create_engine
    from persona_agent.memory.embeddings import Embedder, HashingEmbedder, LocalModelEmbedder
    from persona_agent.memory.recall import PersonaMemory
    from persona_agent.memory.remembered import MemoryStore
    from persona_agent.memory.scope import MemoryScope
    from persona_agent.migrations import prepare_db

    engine = create_engine(url)
    await prepare_db(engine, auto_upgrade=True)
    writer = GroupCommitWriter(engine)
    embedder: Embedder = (
        HashingEmbedder() if embeddings == "hashing" else LocalModelEmbedder(embeddings)
    )
    memory = PersonaMemory(MemoryStore(writer), embedder)
    scope = MemoryScope("socrates", f"bench-{uuid.uuid4().hex}", "c")
    texts = [f"{FILLER[n % len(FILLER)]} ({n})" for n in range(remembered)]
    for n, (fact, _) in enumerate(FACTS):
        texts[n * 200] = fact
    for start in range(0, remembered, 500):
        batch = texts[start : start + 500]
        vectors = await embedder.embed(batch)
        await memory.store.add(scope, embedder.name, [("user", t) for t in batch], vectors)
    times = []
    for n in range(201):
        fact, question = FACTS[n % len(FACTS)]
        said = [{"role": "user", "content": question}, {"role": "assistant", "content": "I see."}]
        started = time.perf_counter()
        await memory.recall(scope, question, [])
        await memory.keep(scope, said)
        times.append((time.perf_counter() - started) * 1000)
    await memory.aclose()
    await writer.aclose()
    await engine.dispose()
    return statistics.median(times[1:]), times[0]


def rss(root: Path, embeddings: str) -> list[Row]:
    figures = {}
    with fake_llm() as llm:
        for memory in (False, True):
            name = f"hub-rss-{embeddings}-{'on' if memory else 'off'}"
            with hub(llm, hub_home(root, name), settings=settings_of(embeddings, memory)) as (
                url,
                started,
            ):
                sends = ("--mode", "send", "-c", "4", "-d", "3600", "--warmup", "0")
                load(f"{url}/a2a/socrates/", *sends, "--max-requests", "300")
                time.sleep(1)
                figures[memory] = rss_kib(started.pid) / 1024
    growth = figures[True] - figures[False]
    print(
        f"    RSS ({embeddings}): memory off {figures[False]:.0f} MB, on {figures[True]:.0f} MB",
        file=sys.stderr,
        flush=True,
    )
    return [Row(f"RSS growth, memory on ({embeddings})", growth, "MB", "<= 50", growth <= 50)]


def throughput(root: Path, embeddings: str, rounds: int, window: float) -> list[Row]:
    rates: dict[bool, list[float]] = {False: [], True: []}
    with (
        fake_llm() as llm,
        hub(
            llm, hub_home(root, f"hub-tp-{embeddings}-off"), settings=settings_of(embeddings, False)
        ) as (off_url, _),
        hub(llm, hub_home(root, f"hub-tp-{embeddings}-on"), settings=settings_of(embeddings)) as (
            on_url,
            _,
        ),
    ):
        urls = {False: f"{off_url}/a2a/socrates/", True: f"{on_url}/a2a/socrates/"}
        for round_ in range(rounds):
            for memory in (False, True) if round_ % 2 == 0 else (True, False):
                summary = load(urls[memory], "--mode", "send", "-c", "16", "-d", str(window))
                if summary["errors"]:
                    raise RuntimeError(f"load errors: {summary['error_kinds']}")
                rates[memory].append(float(summary["rps"]))
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    ratio = on / off
    print(
        f"    throughput ({embeddings}): c=16 sends/s off {rates[False]}, on {rates[True]}",
        file=sys.stderr,
        flush=True,
    )
    return [
        Row(f"sends/s at c=16, memory on / off ({embeddings})", ratio, "x", ">= 0.8", ratio >= 0.8)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embeddings", action="append", help="an embedder (repeatable)")
    parser.add_argument("--part", action="append", choices=("recall", "cost", "rss", "throughput"))
    parser.add_argument("--postgres", help="a PostgreSQL URL for the cost part too")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    parts = args.part or ["recall", "cost", "rss", "throughput"]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as directory:
        root = Path(directory)
        for embeddings in args.embeddings or [DEFAULT_EMBEDDINGS]:
            if "recall" in parts:
                rows += recall(root, embeddings)
            if "cost" in parts:
                rows += cost(root, embeddings, args.postgres)
            if "rss" in parts:
                rows += rss(root, embeddings)
            if "throughput" in parts:
                rows += throughput(root, embeddings, args.rounds, args.window)
    width = max(len(row.figure) for row in rows)
    for row in rows:
        verdict = ("PASS" if row.ok else "FAIL") if row.target else ""
        print(f"{row.figure:<{width}}  {row.value:>9.2f} {row.unit:<3} {row.target:<8} {verdict}")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
