"""The embedded model's transcript, built from the engine's messages and the persona."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from persona_agent.llm.local.transcript import USER_LABEL, PersonaSketch, build_prompt, sketch_of
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.personas.scan import load_persona_dir

BUNDLED = Path(__file__).resolve().parents[2] / "personas"
PERSONAS, _ = load_persona_dir(BUNDLED)


def words(text: str) -> int:
    return len(text.split())


def conversation(persona: Persona, *turns: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": render_system_prompt(persona)}]
    for index, text in enumerate(turns):
        messages.append({"role": "user" if index % 2 == 0 else "assistant", "content": text})
    return messages


def transcript(
    persona: Persona | None, messages: list[dict[str, Any]], budget: int = 10_000
) -> tuple[str, PersonaSketch]:
    sketch = sketch_of(persona, messages)
    return build_prompt(messages, sketch, count_tokens=words, budget=budget), sketch


@pytest.mark.parametrize(
    # A panel is never prompted: its members are (docs/collaboration.md#panels).
    "persona_id",
    sorted(i for i, persona in PERSONAS.items() if persona.panel is None),
)
def test_the_sketch_takes_the_persona_fields_the_transcript_needs(persona_id: str) -> None:
    persona = PERSONAS[persona_id]
    sketch = sketch_of(persona, conversation(persona, "Hi"))
    assert sketch.name == persona.name
    assert sketch.description == " ".join(persona.description.split())
    assert persona.language_style is not None
    assert sketch.tone == persona.language_style.tone
    assert sketch.phrases == tuple(persona.language_style.sample_phrases)
    assert sketch.samples == tuple(
        (" ".join((s.user or "").split()), " ".join((s.assistant or "").split()))
        for s in persona.interaction_samples
    )


def test_the_transcript_shows_samples_then_history_and_ends_with_the_persona_name() -> None:
    persona = PERSONAS["socrates"]
    messages = conversation(persona, "Hello", "Greetings, my friend.", "What is courage?")
    prompt, sketch = transcript(persona, messages)
    assert sketch.name == "Socrates"
    assert prompt.startswith("The following is a conversation with Socrates, the Athenian")
    assert prompt.endswith("\nUser: What is courage?\nSocrates:")
    assert "User: What is justice?\nSocrates: Ah, you ask me" in prompt
    assert "User: Hello\nSocrates: Greetings, my friend.\n\nUser: What is courage?" in prompt
    assert "# " not in prompt  # none of the system prompt's scaffolding


def test_what_does_not_fit_goes_oldest_first_and_samples_last() -> None:
    persona = PERSONAS["ada-lovelace"]
    history = [f"turn {n} " + "word " * 40 for n in range(6)]
    messages = conversation(persona, *history, "The newest question?")
    full, _ = transcript(persona, messages)
    budget = words(full) - 60
    prompt, _ = transcript(persona, messages, budget)
    assert words(prompt) <= budget
    assert "turn 0" not in prompt
    assert "turn 5" in prompt
    assert prompt.count(f"{USER_LABEL}: ") == len(persona.interaction_samples) + 3

    tight, _ = transcript(persona, messages, 60)
    assert tight.endswith("User: The newest question?\nAda Lovelace:")
    assert "Could a machine ever think" not in tight


def test_tool_messages_and_list_content_are_handled() -> None:
    persona = PERSONAS["marie-curie"]
    messages = [
        *conversation(persona, "First?"),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "42"},
        {"role": "assistant", "content": "It is 42."},
        {"role": "user", "content": [{"type": "text", "text": "And then?"}]},
    ]
    prompt, _ = transcript(persona, messages)
    assert prompt.endswith("User: First?\nMarie Curie: It is 42.\n\nUser: And then?\nMarie Curie:")


def test_with_no_persona_the_system_prompt_is_a_plain_description() -> None:
    messages = [
        {"role": "system", "content": "You answer briefly.\n\nMore rules."},
        {"role": "user", "content": "Hi"},
    ]
    prompt, sketch = transcript(None, messages)
    assert sketch.name == "Assistant"
    assert prompt == (
        "The following is a conversation with an assistant. You answer briefly.\n\n"
        "User: Hi\nAssistant:"
    )
