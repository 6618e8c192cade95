"""Who the user is in a persona's prompt: ``{{user}}`` as their name, their description in
a section of its own, the default prompt as it always was, and the checks on a name and a
description."""

from __future__ import annotations

import pytest

from persona_agent.errors import InvalidUserPersonaError
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import USER_HEADING, render_greeting, render_system_prompt
from persona_agent.personas.turn_prompt import assemble_prompt_sync
from persona_agent.personas.user_identity import DEFAULT_USER, UserPersona
from tests.personas import persona_data

ANN = UserPersona("Ann", "Knows {{char}} from school.")


def tess() -> Persona:
    return Persona.from_data(
        "tess",
        persona_data(
            description="Tess tests {{user}}'s code.",
            greeting="Hi {{user}}!",
            scenario="<USER> asks, {{char}} answers.",
            interaction_samples=[{"user": "Who am I?", "assistant": "{{user}}."}],
            post_history_instructions="Answer {{user}} briefly.",
        ),
    )


def test_user_becomes_the_name_everywhere_and_the_description_a_section() -> None:
    persona = tess()
    system = render_system_prompt(persona, user=ANN)
    assert "Tess tests Ann's code." in system
    assert "Ann asks, Tess Tester answers." in system
    assert "Ann: Who am I?\nTess Tester: Ann." in system
    about = "You are talking to Ann.\nAnn's persona: Knows Tess Tester from school."
    assert f"{USER_HEADING}\n{about}" in system
    assert system.index(USER_HEADING) < system.index("# Rules")
    assert render_greeting(persona, "Ann") == "Hi Ann!"
    sections = assemble_prompt_sync(persona, [{"role": "user", "content": "hi"}], ANN)
    assert (sections.user, sections.user_description) == ("Ann", "Knows Tess Tester from school.")
    assert sections.post_history == "Answer Ann briefly."
    assert sections.greeting == "Hi Ann!"
    assert sections.examples == (("Who am I?", "Ann."),)


def test_the_default_user_keeps_the_prompt_as_it_was() -> None:
    persona = tess()
    default = render_system_prompt(persona)
    assert default == render_system_prompt(persona, user=DEFAULT_USER)
    assert USER_HEADING not in default
    assert "Tess tests User's code." in default
    # One user's prompt is never another's (the cache is keyed by the name too).
    assert "Bea" in render_system_prompt(persona, user=UserPersona("Bea"))
    assert "Bea" not in render_system_prompt(persona, user=ANN)


@pytest.mark.parametrize(
    ("name", "description", "says"),
    [
        ("", "", "empty"),
        ("   ", "", "empty"),
        (None, "", "needs a name"),
        ("x" * 65, "", "65 characters"),
        ("Ann\nBea", "", "one line"),
        ("Ann\x00", "", "one line"),
        ("Ann", "x" * 2001, "2001 characters: at most 2,000"),
        (7, "", "must be a string"),
        ("Ann", 7, "must be a string"),
    ],
)
def test_a_bad_user_persona_is_refused(name: object, description: object, says: str) -> None:
    with pytest.raises(InvalidUserPersonaError, match=says):
        UserPersona.of(name, description)


def test_a_user_persona_is_stripped() -> None:
    assert UserPersona.of(" Ann ", " A botanist. \n") == UserPersona("Ann", "A botanist.")
    assert UserPersona.of("x" * 64, "y" * 2000).name == "x" * 64
