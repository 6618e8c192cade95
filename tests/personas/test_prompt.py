"""The system prompt: content, section order, determinism, caching."""

from __future__ import annotations

from pathlib import Path

from persona_agent.personas.loader import load_persona_file
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import PROMPT_CACHE_SIZE, _render_cached, render_system_prompt
from tests.personas import persona_data, write_yaml

SECTIONS = [
    "# Who you are",
    "# Your background",
    "# How you speak",
    "# What you know",
    "# Example exchanges",
    "# Rules",
]


def full_persona() -> Persona:
    return Persona.from_data(
        "tess",
        persona_data(
            personal_background="Born in a test file.\n\nRaised by fixtures.\n",
            language_style={
                "tone": "Dry and exact",
                "characteristics": ["Short sentences", "Counts everything"],
                "sample_phrases": ["Let us check.", "That fails."],
            },
            knowledge_domains={
                "Software testing": ["unit tests", "fixtures"],
                "Bookkeeping": ["ledgers"],
            },
            interaction_samples=[
                {"user": "Does it work?", "assistant": "It passes.\n"},
                {"user": "Why?", "assistant": "Because I checked."},
            ],
        ),
    )


def test_prompt_has_every_section_in_order_with_the_persona_in_it() -> None:
    persona = full_persona()
    prompt = render_system_prompt(persona)
    positions = [prompt.index(section) for section in SECTIONS]
    assert positions == sorted(positions)
    assert prompt.startswith("You are Tess Tester.")
    for text in [
        "A persona made for tests.",
        "Born in a test file.\n\nRaised by fixtures.",
        "Tone: Dry and exact",
        "- Short sentences",
        "- Counts everything",
        "- Let us check.",
        "Software testing:\n  - unit tests\n  - fixtures",
        "Bookkeeping:\n  - ledgers",
        "User: Does it work?\nTess Tester: It passes.\n",
        "User: Why?\nTess Tester: Because I checked.",
        "first person",
        "after your lifetime",
        "rather than inventing",
        "focused",
    ]:
        assert text in prompt, text
    assert prompt.index("Software testing") < prompt.index("Bookkeeping")
    assert prompt.index("Does it work?") < prompt.index("Why?")


def test_prompt_follows_file_order_of_domains() -> None:
    persona = full_persona()
    reordered = persona.model_copy(
        update={"knowledge_domains": dict(reversed(list(persona.knowledge_domains.items())))}
    )
    prompt = render_system_prompt(reordered)
    assert prompt.index("Bookkeeping") < prompt.index("Software testing")


def test_optional_parts_are_left_out_when_empty() -> None:
    prompt = render_system_prompt(Persona.from_data("tess", persona_data()))
    assert "# Example exchanges" not in prompt
    assert "Characteristics:" not in prompt
    assert "Phrases you might use:" not in prompt
    assert "# Rules" in prompt


def test_prompt_is_deterministic_across_separately_loaded_personas(tmp_path: Path) -> None:
    persona = full_persona()
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    data = persona.model_dump(exclude={"id", "version"})
    first = load_persona_file(write_yaml(tmp_path / "one" / "tess.yaml", data))
    second = load_persona_file(write_yaml(tmp_path / "two" / "tess.yaml", data))
    assert first is not second
    _render_cached.cache_clear()
    assert render_system_prompt(first) == render_system_prompt(second)
    assert render_system_prompt(first) == render_system_prompt(persona)


def test_prompts_are_cached_and_the_cache_is_bounded() -> None:
    _render_cached.cache_clear()
    persona = full_persona()
    assert render_system_prompt(persona) is render_system_prompt(persona)
    assert _render_cached.cache_info().hits == 1
    assert _render_cached.cache_info().maxsize == PROMPT_CACHE_SIZE


def test_a_changed_persona_gets_a_new_prompt() -> None:
    persona = full_persona()
    before = render_system_prompt(persona)
    renamed = persona.model_copy(update={"name": "Tessa Tester"})
    after = render_system_prompt(renamed)
    assert "You are Tessa Tester." in after
    assert before != after
