"""The documents' section of a turn's prompt, for every backend: a chat model reads it at
the end of its system prompt, after what memory recalled; the embedded model as a marked
line before the newest message; a turn with no passages reads the prompt it read
before."""

from __future__ import annotations

from pathlib import Path

from persona_agent.llm.local.transcript import build_prompt
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.turn_prompt import (
    DOCUMENTS_HEADING,
    REMEMBERED_HEADING,
    assemble_prompt,
)

PERSONAS, _ = load_persona_dir(Path(__file__).resolve().parents[2] / "personas")
SOCRATES = PERSONAS["socrates"]
ASKED = [{"role": "user", "content": "When does the market close?"}]
PASSAGES = (
    "[1] (handbook.md, passage 1) The market closes at noon.",
    "[2] (rules.pdf, page 2, passage 5) Fish are sold in the northern stoa.",
)


def words(text: str) -> int:
    return len(text.split())


async def test_a_chat_model_reads_the_passages_last_in_the_system_prompt() -> None:
    plain = await assemble_prompt(SOCRATES, [], ASKED)
    sections = await assemble_prompt(
        SOCRATES, [], ASKED, remembered=("The user said: hi",), passages=PASSAGES
    )
    system = sections.messages()[0]["content"]
    assert system.startswith(plain.system)
    assert system.endswith(f"{DOCUMENTS_HEADING}\n{PASSAGES[0]}\n\n{PASSAGES[1]}")
    assert system.index(REMEMBERED_HEADING) < system.index(DOCUMENTS_HEADING)
    assert sections.messages()[1:] == plain.messages()[1:]
    assert DOCUMENTS_HEADING not in plain.messages()[0]["content"]


async def test_the_embedded_model_reads_them_just_before_the_newest_message() -> None:
    sections = await assemble_prompt(SOCRATES, [], ASKED, passages=PASSAGES)
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    marked = f"({sections.name} reads: {PASSAGES[0]} {PASSAGES[1]})"
    assert marked in prompt
    assert prompt.index(marked) < prompt.index("When does the market close?")
    plain = await assemble_prompt(SOCRATES, [], ASKED)
    assert " reads: " not in build_prompt(plain, count_tokens=words, budget=10_000)
