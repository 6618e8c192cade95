"""The remembered section of a turn's prompt, for every backend: a chat model reads it
at the end of the system prompt, the embedded model as a marked paragraph before the
conversation; a turn with nothing remembered reads the prompt it read before memory."""

from __future__ import annotations

from pathlib import Path

from persona_agent.llm.local.transcript import build_prompt
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.turn_prompt import REMEMBERED_HEADING, assemble_prompt

PERSONAS, _ = load_persona_dir(Path(__file__).resolve().parents[2] / "personas")
SOCRATES = PERSONAS["socrates"]
ASKED = [{"role": "user", "content": "What is my dog called?"}]
REMEMBERED = ("The user said: My dog is called Biscuit.",)


def words(text: str) -> int:
    return len(text.split())


async def test_a_chat_model_reads_what_is_remembered_marked_in_the_system_prompt() -> None:
    plain = await assemble_prompt(SOCRATES, [], ASKED)
    sections = await assemble_prompt(SOCRATES, [], ASKED, remembered=REMEMBERED)
    system = sections.messages()[0]["content"]
    assert system.startswith(plain.system)
    assert system.endswith(f"{REMEMBERED_HEADING}\n- {REMEMBERED[0]}")
    assert sections.messages()[1:] == plain.messages()[1:]
    assert plain.messages()[0]["content"] == plain.system  # nothing remembered: as before


async def test_the_embedded_model_reads_it_just_before_the_newest_message() -> None:
    sections = await assemble_prompt(SOCRATES, [], ASKED, remembered=REMEMBERED)
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    marked = f"({sections.name} remembers: {REMEMBERED[0]}"
    assert marked in prompt
    assert prompt.index(marked) < prompt.index("What is my dog called?")
    plain = await assemble_prompt(SOCRATES, [], ASKED)
    assert "remembers" not in build_prompt(plain, count_tokens=words, budget=10_000)
