"""The remembered section of a turn's prompt, for every backend: a chat model reads it
at the end of the system prompt (as docs/memory.md shows it), the embedded model as a
marked line before the newest message; a turn with nothing remembered reads the prompt it
read before memory."""

from __future__ import annotations

from pathlib import Path

from persona_agent.llm.local.transcript import build_prompt
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.turn_prompt import REMEMBERED_HEADING, assemble_prompt

PERSONAS, _ = load_persona_dir(Path(__file__).resolve().parents[2] / "personas")
SOCRATES = PERSONAS["socrates"]
ASKED = [{"role": "user", "content": "What is my dog called?"}]
REMEMBERED = ("The user said: My dog is called Biscuit.",)
MEMORY_DOC = Path(__file__).resolve().parents[2] / "docs" / "memory.md"


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


async def test_docs_memory_shows_the_section_a_chat_model_reads() -> None:
    """docs/memory.md's example of the section is what the hub writes for its two items."""
    doc = MEMORY_DOC.read_text("utf-8")
    shown = doc.split(f"```\n{REMEMBERED_HEADING}\n", 1)[1].split("```", 1)[0]
    items = tuple(line.removeprefix("- ") for line in shown.splitlines())
    assert items == (
        "The user said: My dog is called Biscuit.",
        "You said: Biscuit is a fine name for a dog.",
    )
    sections = await assemble_prompt(SOCRATES, [], ASKED, remembered=items)
    system = sections.messages()[0]["content"]
    assert system.endswith(f"{REMEMBERED_HEADING}\n{shown.rstrip()}")
