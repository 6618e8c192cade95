"""How well the embedded model answers: keyword hits and repetition on a fixed question set.

    uv run python bench/local_eval.py [--max-tokens 96] [--seed 7] [--model-dir DIR]
                                      [--only ID] [--answers FILE] [--threads N]
                                      [--cache-type-k T] [--cache-type-v T]
                                      [--set NAME=VALUE ...] [--continue]

Asks every persona of ``bench/local_eval/questions.yaml`` (the bundled personas by id, the
evaluation cards of ``bench/local_eval/`` by file name) its questions, each in a new
conversation, through the hub's own chat engine (the persona's whole prompt assembly:
greeting, lore, post-history instructions) on the ``local`` backend with a fixed seed, one
generation at a time. An answer *hits* when it contains one of its question's expected
words (any letter case). *Repetition* is the share of an answer's word trigrams that
repeat one earlier in the same answer, over all answers. Prints one line per persona and
the totals; ``--answers`` writes every answer to a JSON file, to read them. ``--set``
tries other sampling settings: a constant of ``persona_agent.llm.local.backend``
(``DEFAULT_TEMPERATURE``, ``REPEAT_PENALTY``, ``PENALTY_WINDOW``, ``TOP_K``, ``TOP_P``,
``MIN_P``) set to a number for the run, e.g. ``--set TOP_P=1.0 --set MIN_P=0.1``.
``--continue`` also continues every answer once (the REST ``continue``: the engine's
``continue`` turn) and prints how many continuations added nothing and how many *echo*
the answer (half or more of their word trigrams are the answer's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from persona_agent.chat.engine import ChatEngine
from persona_agent.chat.events import Done
from persona_agent.chat.history import ConversationHistory
from persona_agent.chat.tools import Turn
from persona_agent.db import GroupCommitWriter, create_engine
from persona_agent.llm.local import backend as local_backend
from persona_agent.llm.local.backend import LocalBackend
from persona_agent.migrations import init_db
from persona_agent.personas.loader import load_persona_file
from persona_agent.personas.model import Persona

REPO = Path(__file__).resolve().parents[1]
EVAL_DIR = REPO / "bench" / "local_eval"
_WORD = re.compile(r"[\w'’]+")


@dataclass(frozen=True, slots=True)
class Question:
    ask: str
    expect: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Scored:
    persona: str
    question: str
    answer: str
    hit: bool
    trigrams: int
    repeated: int
    seconds: float
    echo: bool | None = None
    """The continuation echoed the answer (None: not continued, or it added nothing)."""
    added: str = ""


def load_set(path: Path) -> dict[str, list[Question]]:
    """The question set: persona id (or card file name) → its questions."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {
        key: [Question(str(q["ask"]), tuple(str(w) for w in q["expect"])) for q in questions]
        for key, questions in data.items()
    }


def persona_of(key: str) -> Persona:
    """A bundled persona by id, or an evaluation card by its file name."""
    path = EVAL_DIR / key if "." in key else REPO / "personas" / f"{key}.yaml"
    return load_persona_file(path)


def hits(answer: str, expect: Sequence[str]) -> bool:
    """Whether ``answer`` contains one of the expected words, in any letter case."""
    folded = answer.casefold()
    return any(word.casefold() in folded for word in expect)


def repetition(answer: str) -> tuple[int, int]:
    """(word trigrams of ``answer``, how many of them repeat an earlier one)."""
    words = [word.casefold() for word in _WORD.findall(answer)]
    grams = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
    return len(grams), len(grams) - len(set(grams))


def echoes(added: str, answer: str) -> bool:
    """Whether half or more of ``added``'s word trigrams are ``answer``'s."""

    def grams(text: str) -> list[tuple[str, ...]]:
        words = [word.casefold() for word in _WORD.findall(text)]
        return [tuple(words[i : i + 3]) for i in range(len(words) - 2)]

    mine, theirs = grams(added), set(grams(answer))
    return bool(mine) and 2 * sum(gram in theirs for gram in mine) >= len(mine)


async def ask(
    engine: ChatEngine, persona: Persona, question: Question, n: int, *, go_on: bool = False
) -> Scored:
    started = time.perf_counter()
    answer = ""
    context = f"eval-{persona.id}-{n}"
    async for event in engine.stream(persona, context, question.ask):
        if isinstance(event, Done):
            answer = event.text
    added = ""
    if go_on:
        turn = Turn(persona.id, context, mode="continue")
        async for event in engine.stream(persona, context, "", turn=turn):
            if isinstance(event, Done):
                added = event.text
    trigrams, repeated = repetition(answer)
    return Scored(
        persona.id,
        question.ask,
        answer,
        hits(answer, question.expect),
        trigrams,
        repeated,
        time.perf_counter() - started,
        echoes(added, answer) if added.strip() else None,
        added,
    )


def summary(label: str, scored: Sequence[Scored]) -> str:
    hit = sum(s.hit for s in scored)
    grams = sum(s.trigrams for s in scored)
    repeated = sum(s.repeated for s in scored)
    words = sum(len(_WORD.findall(s.answer)) for s in scored) / max(len(scored), 1)
    rate = 100 * repeated / grams if grams else 0.0
    empty = sum(not s.answer.strip() for s in scored)
    return (
        f"{label:<22} {hit:>2}/{len(scored):<3} {100 * hit / max(len(scored), 1):>5.0f}% "
        f"{rate:>9.1f}% {words:>6.1f} {empty:>5}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model-dir", type=Path, default=Path("data/models"))
    parser.add_argument("--only", action="append", help="a persona id or card file (repeatable)")
    parser.add_argument("--answers", type=Path, help="write every answer to this JSON file")
    parser.add_argument("--threads", type=int, default=None, help="default: every core")
    parser.add_argument("--cache-type-k", default=None, help="f16 or q8_0; the backend's default")
    parser.add_argument("--cache-type-v", default=None, help="f16 or q8_0; the backend's default")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE (sampling)")
    parser.add_argument("--continue", dest="go_on", action="store_true", help="continue each")
    args = parser.parse_args()
    for assignment in args.set:
        name, _, value = assignment.partition("=")
        current = getattr(local_backend, name)  # an unknown name fails here
        setattr(local_backend, name, type(current)(value))
        print(f"{name} = {getattr(local_backend, name)} (default {current})")

    questions = load_set(EVAL_DIR / "questions.yaml")
    if args.only:
        questions = {key: value for key, value in questions.items() if key in args.only}
    llm = LocalBackend(
        model_dir=args.model_dir,
        max_tokens=args.max_tokens,
        seed=args.seed,
        threads=args.threads,
        **{
            name: getattr(args, name)
            for name in ("cache_type_k", "cache_type_v")
            if getattr(args, name) is not None
        },
    )
    await llm.load()
    results: list[Scored] = []
    with tempfile.TemporaryDirectory() as scratch:
        database = create_engine(f"sqlite+aiosqlite:///{Path(scratch) / 'eval.db'}")
        await init_db(database)
        engine = ChatEngine(llm, ConversationHistory(GroupCommitWriter(database)))
        print(f"{'persona':<22} {'hits':>6} {'':>6} {'repeated':>10} {'words':>6} {'empty':>5}")
        try:
            for key, asked in questions.items():
                persona = persona_of(key)
                scored = [
                    await ask(engine, persona, q, n, go_on=args.go_on) for n, q in enumerate(asked)
                ]
                results += scored
                print(summary(persona.id, scored), flush=True)
        finally:
            await llm.aclose()
            await database.dispose()
    print(summary("all", results))
    if args.go_on:
        echoed = sum(s.echo is True for s in results)
        nothing = sum(s.echo is None for s in results)
        print(f"continued {len(results)}: {echoed} echoed the answer, {nothing} added nothing")
    if args.answers is not None:
        rows: list[dict[str, Any]] = [
            {"persona": s.persona, "question": s.question, "answer": s.answer, "hit": s.hit}
            | ({"continued": s.added} if args.go_on else {})
            for s in results
        ]
        args.answers.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
