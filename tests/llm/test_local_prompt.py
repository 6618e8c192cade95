"""The embedded model's transcript, written from the turn's prompt assembly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from persona_agent.llm.local.prefixes import new_conversation, prefix_of
from persona_agent.llm.local.transcript import (
    USER_LABEL,
    build_prompt,
    continued,
    sections_of,
    stop_strings,
)
from persona_agent.personas.macros import apply_macros
from persona_agent.personas.model import Persona
from persona_agent.personas.scan import load_persona_dir
from persona_agent.personas.turn_prompt import PromptSections, assemble_prompt
from persona_agent.personas.user_identity import UserPersona
from tests.personas.cards import MIRA_DATA

BUNDLED = Path(__file__).resolve().parents[2] / "personas"
PERSONAS, _ = load_persona_dir(BUNDLED)
MIRA = Persona.from_data(
    "mira",
    {
        key: MIRA_DATA[card_key]
        for key, card_key in {
            "name": "name",
            "description": "description",
            "personality": "personality",
            "scenario": "scenario",
            "greeting": "first_mes",
            "system_prompt": "system_prompt",
            "post_history_instructions": "post_history_instructions",
            "lore": "character_book",
        }.items()
    }
    | {"interaction_samples": [{"content": MIRA_DATA["mes_example"]}]},
)


def words(text: str) -> int:
    return len(text.split())


def said(*turns: str) -> list[dict[str, Any]]:
    """Messages alternating user and assistant, the user first."""
    return [
        {"role": "user" if index % 2 == 0 else "assistant", "content": text}
        for index, text in enumerate(turns)
    ]


async def transcript(
    persona: Persona, messages: list[dict[str, Any]], budget: int = 10_000
) -> tuple[str, PromptSections]:
    sections = await assemble_prompt(persona, messages[:-1], messages[-1:])
    return build_prompt(sections, count_tokens=words, budget=budget), sections


@pytest.mark.parametrize(
    # A panel is never prompted: its members are (docs/collaboration.md#panels).
    "persona_id",
    sorted(i for i, persona in PERSONAS.items() if persona.panel is None),
)
async def test_the_transcript_shows_every_part_of_a_bundled_persona(persona_id: str) -> None:
    persona = PERSONAS[persona_id]
    prompt, sections = await transcript(persona, said("Hi"))
    assert sections.name == persona.name
    assert prompt.startswith(f"The following is a conversation with {persona.name}, ")
    assert " ".join(persona.description.split())[1:] in prompt
    assert persona.language_style is not None
    assert f"Manner: {persona.language_style.tone.rstrip('.')}." in prompt
    background = " ".join(str(persona.personal_background).split())
    assert background[:60] in prompt  # its first sentences
    assert f"{persona.name} knows about: {', '.join(persona.knowledge_domains)}." in prompt
    for sample in persona.interaction_samples:
        exchange = f"{USER_LABEL}: {' '.join((sample.user or '').split())}\n{persona.name}: "
        assert exchange in prompt
    assert prompt.endswith(f"\n\n{USER_LABEL}: Hi\n{persona.name}:")
    assert "# " not in prompt  # none of the system prompt's scaffolding


async def test_a_card_reaches_the_transcript_whole_macros_replaced() -> None:
    prompt, sections = await transcript(MIRA, said("Tell me about the Kestrel."))
    assert "{{" not in prompt
    assert "<USER>" not in prompt.upper()
    opening = "Write Captain Mira Voss's next reply in a space-salvage roleplay.\n\n"
    assert prompt.startswith(opening)
    assert (
        "The following is a conversation with Captain Mira Voss. Captain Mira Voss is the "
        "captain of the salvage ship Kestrel"
    ) in prompt
    assert "Dry, decisive, protective of her crew" in prompt
    assert "Scenario: User has just signed on as the Kestrel's new mechanic." in prompt
    assert "User: Why salvage?\nCaptain Mira Voss: Because the dead don't haggle." in prompt
    assert "The Kestrel is a patched-up Class IV hauler" in prompt
    assert prompt.endswith(
        "User: Tell me about the Kestrel.\n[Stay terse; no more than three sentences.]\n"
        "Captain Mira Voss:"
    )
    # The chat model's rendering of the same assembly has the same parts.
    messages = sections.messages()
    assert "The Kestrel is a patched-up Class IV hauler" in messages[0]["content"]
    assert messages[-1] == {
        "role": "system",
        "content": "Stay terse; no more than three sentences.",
    }


@pytest.mark.parametrize("key_said", [True, False])
async def test_a_lore_entry_is_in_the_transcript_exactly_when_its_key_is_said(
    key_said: bool,
) -> None:
    question = "Where do you owe money?" + (" At Halden?" if key_said else "")
    prompt, _ = await transcript(MIRA, said("Hello.", "Hello yourself.", question))
    assert ("Halden Yard is the salvage port where Mira owes money" in prompt) is key_said
    assert "Class IV hauler" not in prompt  # nobody said Kestrel
    if key_said:  # a note just before the newest message, after the history
        assert "Hello yourself.\n\n(Note: Halden Yard is the salvage port" in prompt
        assert "money to everyone.)\nUser: Where do you owe money? At Halden?\n" in prompt


async def test_the_greeting_opens_the_transcript_of_a_new_conversation() -> None:
    persona = MIRA
    greeting = {"role": "assistant", "content": "So you're the new mechanic, User?"}
    sections = await assemble_prompt(persona, [], [greeting, *said("I am.")])
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    assert "Captain Mira Voss: So you're the new mechanic, User?\n\nUser: I am.\n" in prompt


async def test_the_user_who_said_who_they_are_is_in_the_transcript() -> None:
    ann = UserPersona("Ann", "A mechanic from {{char}}'s home port.")
    greeting = {"role": "assistant", "content": "Hello."}
    sections = await assemble_prompt(MIRA, [], [greeting, *said("I am.")], user=ann)
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    assert "Captain Mira Voss talks to Ann: A mechanic from Captain Mira Voss's home port." in (
        prompt
    )
    assert f"\n{USER_LABEL}: I am.\n" in prompt  # the turns keep the label the model stops at


async def test_what_does_not_fit_goes_in_the_documented_order() -> None:
    persona = PERSONAS["ada-lovelace"]
    history = [f"turn {n} " + "word " * 40 for n in range(6)]
    full, sections = await transcript(persona, said(*history, "The newest question?"))
    background = " ".join(str(persona.personal_background).split())[:60]
    assert background in full

    # First the background, then the oldest turns.
    (paragraph,) = [p for p in full.split("\n\n") if p.startswith(background)]
    budget = words(full) - words(paragraph) - 30
    prompt = build_prompt(sections, count_tokens=words, budget=budget)
    assert words(prompt) <= budget
    assert background not in prompt
    assert "turn 0" not in prompt
    assert "turn 5" in prompt
    assert prompt.count(f"{USER_LABEL}: ") == len(persona.interaction_samples) + 3

    # Then the examples, then the details; the description and the newest message stay.
    tight = build_prompt(sections, count_tokens=words, budget=60)
    assert tight.endswith("User: The newest question?\nAda Lovelace:")
    assert "Could a machine ever think" not in tight
    assert "knows about" not in tight
    assert "Analytical Engine" in tight


async def test_lore_goes_after_everything_else_but_the_conversation() -> None:
    _, sections = await transcript(MIRA, said("The Kestrel and Halden?"))
    assert len(sections.lore) == 2
    intro = len(build_prompt(sections, count_tokens=words, budget=10_000).split())
    prompt = build_prompt(sections, count_tokens=words, budget=intro - 5)
    assert "Ask me in a year" not in prompt  # the last example went first
    assert "Halden Yard" in prompt
    assert "Class IV hauler" in prompt


def test_tool_messages_and_list_content_are_handled() -> None:
    persona = PERSONAS["marie-curie"]
    messages = [
        {"role": "system", "content": "ignored"},
        *said("First?"),
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "42"},
        {"role": "assistant", "content": "It is 42."},
        {"role": "user", "content": [{"type": "text", "text": "And then?"}]},
    ]
    sections = sections_of(None, persona, messages)
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    assert prompt.endswith("User: First?\nMarie Curie: It is 42.\n\nUser: And then?\nMarie Curie:")


def test_with_no_persona_the_system_prompt_is_a_plain_description() -> None:
    messages = [
        {"role": "system", "content": "You answer briefly.\n\nMore rules."},
        {"role": "user", "content": "Hi"},
    ]
    sections = sections_of(None, None, messages)
    assert sections.name == "Assistant"
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    assert prompt == (
        "The following is a conversation with an assistant. You answer briefly.\n\n"
        "User: Hi\nAssistant:"
    )


async def test_the_newest_message_is_whole_a_past_one_cut() -> None:
    """A message with a document (within its budget, docs/media.md#documents) reaches the
    transcript whole, on one line; the same text as a past turn is cut to 1,200 characters."""
    persona = PERSONAS["marie-curie"]
    document = " ".join(f"Row {n}: radium sample, {n} milligrams." for n in range(120))
    asked = f"Read this.\n\n[document: samples.csv]\n{document}\n[end of samples.csv]"
    prompt, _ = await transcript(persona, said(asked))
    assert prompt.endswith(f"User: {' '.join(asked.split())}\nMarie Curie:")
    later, _ = await transcript(persona, said(asked, "Noted.", "And the last row?"))
    assert "Row 119: radium sample, 119 milligrams. [end of samples.csv]" not in later
    assert "User: And the last row?\nMarie Curie:" in later
    assert "Row 20: radium sample" in later  # the past turn, its first 1,200 characters


async def test_a_continuation_ends_with_the_persona_s_answer_for_the_model_to_go_on() -> None:
    persona = MIRA  # a card with post-history instructions
    messages = said("Who are you?", "I am the captain of this ship.")
    nudge = {"role": "system", "content": "[Continue your last message.]"}
    sections = await assemble_prompt(persona, messages, [nudge])
    prompt = build_prompt(sections, count_tokens=words, budget=10_000)
    assert prompt.endswith("\nCaptain Mira Voss: I am the captain of this ship.")
    assert continued(sections) == "I am the captain of this ship."
    ended = await assemble_prompt(persona, said("Who are you?", "The captain. "), [nudge])
    assert continued(ended) == "The captain. "  # its space kept: the addition needs none
    # The instructions come before the answer, never after it.
    assert f"[{' '.join(sections.post_history.split())}]\nCaptain Mira Voss: I am" in prompt
    asked = await assemble_prompt(persona, messages, said("And the ship?"))
    assert continued(asked) is None
    assert build_prompt(asked, count_tokens=words, budget=10_000).endswith("\nCaptain Mira Voss:")


async def test_the_stop_strings_are_the_turn_labels_and_the_user_s_own_name() -> None:
    kestrel = UserPersona("Kestrel")
    sections = await assemble_prompt(MIRA, [], said("Hello."), user=kestrel)
    assert stop_strings(sections) == ["\nUser:", "\nKestrel:", "\nCaptain Mira Voss:"]
    plain = await assemble_prompt(MIRA, [], said("Hello."))
    assert stop_strings(plain) == ["\nUser:", "\nCaptain Mira Voss:"]


@pytest.mark.parametrize("persona_id", ["socrates", "mira"])
async def test_a_persona_s_fixed_prefix_is_what_every_new_conversation_starts_with(
    persona_id: str,
) -> None:
    persona = MIRA if persona_id == "mira" else PERSONAS[persona_id]
    prefix = prefix_of(build_prompt(new_conversation(persona), count_tokens=words, budget=10_000))
    assert prefix is not None
    assert prefix.endswith(f"\n{USER_LABEL}:")
    messages = said("What is virtue?")
    if persona.greeting:  # the conversation opened with it, as the engine opens it
        greeting = apply_macros(persona.greeting, persona.name.strip())
        messages.insert(0, {"role": "assistant", "content": greeting})
    sections = await assemble_prompt(persona, [], messages)
    first = build_prompt(sections, count_tokens=words, budget=10_000)
    assert first.startswith(prefix + " What is virtue?")
