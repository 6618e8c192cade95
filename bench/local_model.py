"""Speed of the embedded local model: tokens per second and time to first token.

    uv run python bench/local_model.py [--rounds 3] [--max-tokens 160] [--model-dir DIR]
                                       [--threads N] [--long-card-only]
                                       [--slots N] [--concurrent N] [--first-words]

Runs the ``local`` backend directly (no HTTP: the hub's own overhead is measured
by ``bench/run.py``), one generation at a time as the hub does, asking each
bundled persona a question per round. Prints one table: the model load time,
then per round the median time to first answer text, the median tokens per
second of generation, and answer lengths. The model file is assembled into
``--model-dir`` (default: ``./data/models``, where ``persona-agent serve`` keeps it).

Then a long character card (Socrates with a long description and many sample exchanges,
some 1,500 tokens of prompt): the time to first text of its first conversation (the
whole card read), and of a new conversation with it after every other persona spoke
(``new conversation``: only the new turn needs reading when the card's prefix is kept).
It uses only the backend's oldest interface, so an older checkout can be measured the
same way (``PYTHONPATH=<its src>``); ``--slots`` (llama.cpp's parallel slots) needs the
server-based backend.

Then a conversation's second message (the first answer in its history): its time to first
text. Last, ``--concurrent`` conversations asked at once (default 4): the aggregate tokens per
second, each one's time to first text and tokens per second, the process's peak RSS, and the
CPU time the process spent per 1,000 tokens generated (llama.cpp's threads included: on a
busy machine the clearest measure of what a path costs, since it does not count the time
other processes take the cores).

``--first-words`` measures instead the first text of each bundled persona (issue 49 item 4):
a new conversation cold (the persona never read), once warmed (``LocalBackend.warm``, as
the hub does after start-up), the conversation's second message, and a new conversation
after a restart (a new backend restoring the prefixes saved by the one before); each a
median over the personas, with the time the warm-up took.

``--binding-python PYTHON`` compares instead today's server with the ``llama-cpp-python``
binding it replaced (issue 49 item 6), each engine in a process of its own, rounds
alternating: ``bench/local_binding.py`` (PYTHON is a venv holding the binding: bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from persona_agent.llm.base import ChatRequest, StreamEnd, TextDelta
from persona_agent.llm.local.backend import LocalBackend
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.scan import load_persona_dir

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "Who are you, and what do you do?",
    "What is the most important thing you have learned?",
    "What would you tell a young person who wants to follow your path?",
]


async def one_answer(
    llm: LocalBackend,
    persona: Persona,
    question: str,
    earlier: tuple[dict[str, str], ...] = (),
) -> tuple[float, float, int, str]:
    """(seconds to the first text, seconds in all, completion tokens, text) of one answer,
    after the ``earlier`` messages of its conversation."""
    system = render_system_prompt(persona)
    request = ChatRequest(
        messages=[
            {"role": "system", "content": system},
            *earlier,
            {"role": "user", "content": question},
        ],
        persona=persona,
    )
    start = time.perf_counter()
    first = 0.0
    tokens = 0
    text = ""
    async for item in llm.stream(request):
        if isinstance(item, TextDelta):
            first = first or time.perf_counter() - start
            text += item.text
        elif isinstance(item, StreamEnd):
            tokens = item.usage.completion_tokens
    return first, time.perf_counter() - start, tokens, text


async def first_words(args: argparse.Namespace, personas: list[Persona]) -> None:
    """First text of a new conversation: cold, warmed, its second message, after a restart."""
    chat = [p for p in personas if p.panel is None]

    def backend(slot_dir: Path | None) -> LocalBackend:
        return LocalBackend(
            model_dir=args.model_dir,
            max_tokens=args.max_tokens,
            threads=args.threads,
            slot_dir=slot_dir,
            **({} if args.slots is None else {"slots": args.slots}),
        )

    async def firsts(llm: LocalBackend, *, second: bool = False) -> list[float]:
        times = []
        for persona in chat:
            first, _, _, text = await one_answer(llm, persona, QUESTIONS[0])
            if second:
                earlier = (
                    {"role": "user", "content": QUESTIONS[0]},
                    {"role": "assistant", "content": text},
                )
                first, _, _, _ = await one_answer(llm, persona, QUESTIONS[1], earlier)
            times.append(first)
        return times

    def line(label: str, times: list[float]) -> None:
        each = ", ".join(f"{t * 1000:.0f}" for t in times)
        print(f"{label:<34} p50 {statistics.median(times) * 1000:>6.0f} ms  ({each})", flush=True)

    print(f"first words, {len(chat)} personas, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as scratch:
        slots = Path(scratch) / "prefixes"
        for label, slot_dir, warm, second in (
            ("new conversation, cold", None, False, False),
            ("new conversation, once warmed", slots, True, False),
            ("second message", None, False, True),
            ("new conversation, after a restart", slots, True, False),
        ):
            llm = backend(slot_dir)
            try:
                await llm.load()
                if warm:
                    start = time.perf_counter()
                    how = await llm.warm(chat)
                    took = time.perf_counter() - start
                    print(f"  warm-up {took:.1f} s: {sorted(set(how.values()))}", flush=True)
                line(label, await firsts(llm, second=second))
            finally:
                await llm.aclose()


def long_card(persona: Persona) -> Persona:
    """``persona`` with a long card: its background in the description, and its sample
    exchanges three times over (with the questions varied)."""
    data = persona.model_dump(mode="json", exclude_none=True)
    background = " ".join(str(persona.personal_background or "").split())
    data["description"] = f"{persona.description} {background}"[:2400]
    samples = data["interaction_samples"]
    data["interaction_samples"] = [
        {**sample, "user": f"{prefix}{sample['user']}"}
        for prefix in ("", "Tell me again: ", "One more time, please: ")
        for sample in samples
        if sample.get("user")
    ]
    return Persona.model_validate(data)


async def long_card_times(llm: LocalBackend, card: Persona, others: list[Persona]) -> None:
    """Time to first text with the long card: its first conversation, then a new one after
    the others spoke."""
    first, _, _, _ = await one_answer(llm, card, QUESTIONS[0])
    for persona in others:
        await one_answer(llm, persona, QUESTIONS[0])
    again, _, _, _ = await one_answer(llm, card, QUESTIONS[1])
    print(f"long card ({card.name}): first conversation ttft {first * 1000:.0f} ms")
    print(f"long card ({card.name}): new conversation ttft {again * 1000:.0f} ms")


async def second_message_time(llm: LocalBackend, persona: Persona) -> None:
    """Time to first text of a conversation's second message."""
    _, _, _, said = await one_answer(llm, persona, QUESTIONS[0])
    earlier = (
        {"role": "user", "content": QUESTIONS[0]},
        {"role": "assistant", "content": said},
    )
    first, total, tokens, _ = await one_answer(llm, persona, QUESTIONS[1], earlier)
    speed = tokens / (total - first) if total > first else 0.0
    print(f"second message ({persona.name}): ttft {first * 1000:.0f} ms, {speed:.1f} tokens/s")


async def concurrent_times(llm: LocalBackend, personas: list[Persona], count: int) -> None:
    """``count`` conversations asked at once: aggregate tokens/s and each time to first text."""
    start = time.perf_counter()
    asked = [one_answer(llm, personas[i % len(personas)], QUESTIONS[2]) for i in range(count)]
    results = await asyncio.gather(*asked)
    wall = time.perf_counter() - start
    tokens = sum(tokens for _, _, tokens, _ in results)
    firsts = ", ".join(f"{first * 1000:.0f}" for first, _, _, _ in results)
    speeds = ", ".join(
        f"{tokens / (total - first):.1f}" for first, total, tokens, _ in results if total > first
    )
    print(f"{count} at once: {tokens / wall:.1f} tokens/s aggregate; ttft ms {firsts}")
    print(f"{count} at once: tokens/s each {speeds}")


def usage_report(llm: LocalBackend) -> None:
    """Peak RSS, and CPU seconds a thousand tokens generated."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MB")
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = used.ru_utime + used.ru_stime
    made = llm.tokens_generated
    print(f"CPU {cpu:.1f} s for {made} tokens: {cpu * 1000 / max(made, 1):.1f} s per 1000")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--model-dir", type=Path, default=Path("data/models"))
    parser.add_argument("--threads", type=int, default=None, help="default: every core")
    parser.add_argument("--long-card-only", action="store_true", help="no rounds")
    parser.add_argument("--slots", type=int, default=None, help="default: the backend's")
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--first-words", action="store_true", help="only the first words")
    parser.add_argument("--binding-python", help="against the old binding: its venv's python")
    parser.add_argument("--binding-src", type=Path, default=None, help="default: OLD_COMMIT's")
    parser.add_argument("--binding-passive", action="store_true", help="and OMP passive")
    parser.add_argument("--server-active", action="store_true", help="and the server, OMP active")
    args = parser.parse_args()
    if args.binding_python:
        from local_binding import against_binding  # type: ignore[import-not-found]

        against_binding(args)
        return

    personas, _ = load_persona_dir(REPO / "personas")
    ordered = [p for _, p in sorted(personas.items())]
    if args.first_words:
        await first_words(args, ordered)
        return
    extra = {} if args.slots is None else {"slots": args.slots}
    llm = LocalBackend(
        model_dir=args.model_dir, max_tokens=args.max_tokens, threads=args.threads, **extra
    )
    start = time.perf_counter()
    await llm.load()
    print(f"model loaded in {time.perf_counter() - start:.2f} s ({len(ordered)} personas)")
    try:
        if not args.long_card_only:
            print(f"{'round':>5} {'answers':>7} {'ttft p50 ms':>11} {'tok/s':>9} {'tokens':>10}")
        for round_ in range(1, 0 if args.long_card_only else args.rounds + 1):
            question = QUESTIONS[(round_ - 1) % len(QUESTIONS)]
            results = [await one_answer(llm, persona, question) for persona in ordered]
            ttft = statistics.median(first for first, _, _, _ in results) * 1000
            speed = statistics.median(
                tokens / (total - first) for first, total, tokens, _ in results if total > first
            )
            length = statistics.median(tokens for _, _, tokens, _ in results)
            print(f"{round_:>5} {len(results):>7} {ttft:>11.0f} {speed:>9.1f} {length:>10.0f}")
        card = long_card(personas["socrates"])
        await long_card_times(llm, card, [p for p in ordered if p.id != "socrates"])
        await second_message_time(llm, personas["marie-curie"])
        if args.concurrent:
            await concurrent_times(llm, ordered, args.concurrent)
        usage_report(llm)
    finally:
        await llm.aclose()


if __name__ == "__main__":
    asyncio.run(main())
