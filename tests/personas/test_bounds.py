"""What a persona renders to is bounded at load: macros expanded, repeated names counted;
and a lorebook has at most so many entries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf.json_format import MessageToJson
from pydantic import ValidationError

from persona_agent.a2a.cards import build_agent_card
from persona_agent.errors import PersonaFileError
from persona_agent.personas.bounds import NAME_REPEATS, OPENING_CHARS, rendered_chars
from persona_agent.personas.formats.lorebook import LoreSelection
from persona_agent.personas.loader import read_persona
from persona_agent.personas.macros import MAX_USER_NAME_CHARS, apply_macros, expanded_length
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import conversation_turns, render_system_prompt
from persona_agent.security.limits import Limits
from tests.personas import persona_data

LIMIT = "(PERSONA_AGENT_MAX_PERSONA_BYTES)"
LONG_NAME = "N" * 2000


def refused(data: dict[str, Any], limits: Limits | None = None) -> dict[str, Any]:
    """The one error ``Persona.from_data`` gives for ``data``."""
    with pytest.raises(ValidationError) as caught:
        Persona.from_data("bomb", data, **({"limits": limits} if limits else {}))
    (error,) = caught.value.errors()
    return dict(error)


@pytest.mark.parametrize(
    "text",
    ["", "plain", "{{char}} and {{ User }}", "<BOT>, <user> and <char>", "{{char}" * 3, "<bot"],
)
@pytest.mark.parametrize(("char", "user"), [("", ""), ("Orla", "Ben"), ("x" * 50, "y" * 64)])
def test_the_expanded_length_is_what_applying_the_macros_gives(
    text: str, char: str, user: str
) -> None:
    assert expanded_length(text, len(char), len(user)) == len(apply_macros(text, char, user))


def test_a_greeting_of_many_macros_and_a_long_name_is_refused_naming_the_field() -> None:
    # The card of the report: 60 KB that became a 97 MB agent card and prompt.
    data = persona_data(name=LONG_NAME, greeting="{{char}} " * 7000)
    error = refused(data)
    assert error["loc"] == ("greeting",)
    greeting = 7000 * (2000 + 1)
    unchecked = Persona.model_validate({"id": "bomb", **data})  # not through from_data
    sizes = dict(rendered_chars(unchecked))
    assert sizes[("greeting",)] == greeting
    assert sizes[("name",)] == 2000 * NAME_REPEATS
    total = sum(sizes.values())
    assert f"the persona's text would be {total:,} characters" in error["msg"]
    assert f"this field makes {greeting:,} of them" in error["msg"]
    assert f"more than the limit of 1,048,576 {LIMIT}" in error["msg"]
    assert "{{char}} as the name, {{user}} as a name of up to 64 characters" in error["msg"]


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("alternate_greetings", ["hi", "{{char}}" * 600], ("alternate_greetings", 1)),
        ("system_prompt", "{{original}}" * 300, ("system_prompt",)),
        ("post_history_instructions", "<BOT>" * 600, ("post_history_instructions",)),
        ("scenario", "{{user}}" * 20_000, ("scenario",)),
        (
            "lore",
            {"entries": [{"content": "x"}, {"keys": ["k"], "content": "{{char}}" * 600}]},
            ("lore", "entries", 1, "content"),
        ),
        (
            "interaction_samples",
            [{"type": "conversation", "content": "\n".join(["A: hi"] * 600)}],
            ("interaction_samples", 0),
        ),
        (
            "knowledge_domains",
            {f"Domain {n}": ["t"] for n in range(600)},
            ("knowledge_domains",),
        ),
        ("personal_background", {"Early life": ["{{char}}"] * 600}, ("personal_background",)),
    ],
)
def test_each_field_macros_reach_is_counted_and_named(
    field: str, value: Any, where: tuple[Any, ...]
) -> None:
    # A name of 2,000 characters said 600 times is 1.2 million: over the 1 MiB limit.
    # {{user}} counts as the longest name a caller may give (64 characters): 20,000 of them
    # are 1.28 million.
    error = refused(persona_data(name=LONG_NAME, **{field: value}))
    assert error["loc"][: len(where)] == where
    assert LIMIT in error["msg"]


def test_a_persona_just_under_the_limit_is_taken_and_renders_within_it() -> None:
    limits = Limits(max_bytes=200_000)
    data = persona_data(name="N" * 100, greeting="{{char}}" * 1500, scenario="{{user}}" * 500)
    persona = Persona.from_data("fits", data, limits=limits)
    total = sum(chars for _, chars in rendered_chars(persona))
    assert 180_000 < total <= 200_000
    assert len(render_system_prompt(persona)) < total
    over = persona_data(**{**data, "greeting": "{{char}}" * 1900})
    assert LIMIT in refused(over, limits)["msg"]


def test_the_name_counts_where_the_prompt_repeats_it() -> None:
    persona = Persona.from_data("p", persona_data(name="Orla", system_prompt="{{original}}"))
    sizes = dict(rendered_chars(persona))
    assert sizes[("name",)] == 4 * NAME_REPEATS
    assert sizes[("system_prompt",)] == len("{{original}}") + OPENING_CHARS + 2 * 4
    prompt = render_system_prompt(persona)
    assert prompt.count("Orla") <= NAME_REPEATS
    opening = prompt.split("\n\n", 1)[0]
    assert len(opening.replace("Orla", "")) <= OPENING_CHARS
    exchange = Persona.from_data(
        "q", persona_data(name="Orla", interaction_samples=[{"user": "a", "assistant": "b"}])
    )
    # Its texts (and keys), and each speaker's name: the user's line and the persona's.
    texts = len("useraassistantb")
    sample = dict(rendered_chars(exchange))[("interaction_samples", 0)]
    assert sample == texts + 4 + MAX_USER_NAME_CHARS


def test_a_prompt_with_every_lore_entry_stays_within_the_checked_size() -> None:
    data = persona_data(
        name="Orla " * 40,
        greeting="{{char}}",
        lore={"entries": [{"keys": ["k"], "content": f"{{{{char}}}} {n}"} for n in range(300)]},
        interaction_samples=[{"content": "Q: {{user}}?\nA: {{char}}.\n" * 50}],
    )
    persona = Persona.from_data("p", data)
    assert persona.lore is not None
    every = LoreSelection(before=tuple(entry.content for entry in persona.lore.entries))
    checked = sum(chars for _, chars in rendered_chars(persona))
    prompt = render_system_prompt(persona, every)
    assert len(prompt) <= checked + 2000  # headings and labels


def test_a_card_that_expands_too_far_is_refused_naming_the_card_field() -> None:
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {"name": LONG_NAME, "description": "d", "first_mes": "{{char}}" * 7000},
    }
    raw = json.dumps(card).encode()
    assert len(raw) < 64 * 1024  # 60 KB
    with pytest.raises(PersonaFileError) as caught:
        read_persona(None, raw, source="bomb.json", fmt="json")
    (problem,) = caught.value.problems
    assert problem.startswith("data.first_mes: with its macros expanded")
    assert LIMIT in problem


def test_a_lorebook_of_too_many_entries_is_refused_naming_the_count() -> None:
    book = {"entries": [{"keys": [f"k{n}"], "content": "c"} for n in range(6)]}
    error = refused(persona_data(lore=book), Limits(max_lore_entries=5))
    assert error["loc"] == ("lore", "entries")
    assert error["msg"] == (
        "the lorebook has 6 entries, more than the limit of 5 (PERSONA_AGENT_MAX_LORE_ENTRIES)"
    )
    Persona.from_data("ok", persona_data(lore=book), limits=Limits(max_lore_entries=6))


def test_a_long_written_conversation_is_read_whole() -> None:
    # Each line added to the turn so far once copied the turn again: quadratic, minutes
    # here. How long it takes is bench/linear_time.py's figure.
    content = "A: start\n" + "more words\n" * 100_000
    turns = conversation_turns(content, "Orla")
    assert turns == [("persona", "start\n" + "\n".join(["more words"] * 100_000))]
    assert conversation_turns("Q: a\n\n  \nb\nA:  \n c \n", "x") == [
        ("user", "a\nb"),
        ("persona", "c"),
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"greeting": "{{char}}" * 230, "alternate_greetings": ["<BOT>" * 200] * 3},
        {"knowledge_domains": {f"Domain {n}": ["topic"] for n in range(220)}},
        {"interaction_samples": [{"content": "A: {{char}}\n" * 200}]},
    ],
)
def test_the_agent_card_and_the_prompt_stay_within_a_few_times_the_limit(
    fields: dict[str, Any],
) -> None:
    # A name of 400 characters, as many macros and repeats as the limit takes.
    limits = Limits(max_bytes=400_000)
    persona = Persona.from_data("p", persona_data(name="N" * 400, **fields), limits=limits)
    checked = sum(chars for _, chars in rendered_chars(persona))
    assert checked > 80_000  # the case is a large one
    card = json.dumps(json.loads(MessageToJson(build_agent_card(persona, "http://hub"))))
    assert len(card) <= 3 * limits.max_bytes
    assert len(render_system_prompt(persona)) <= 2 * limits.max_bytes
