"""The original persona-agent format: read as written, every value in the prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from pydantic import ValidationError

from persona_agent.a2a.cards import build_agent_card
from persona_agent.personas.loader import dump_persona_yaml, load_persona_file
from persona_agent.personas.model import Persona, validation_problems
from persona_agent.personas.prompt import render_system_prompt, sample_exchanges
from tests.personas import persona_data

TRUMP = """\
name: Donald Trump
description: 45th President of the United States, businessman, and media personality.
personal_background:
  birth: June 14, 1946, Queens, New York City, USA
  profession: Businessman, Politician, Television Personality
language_style:
  tone: Assertive, direct, hyperbolic
  vocabulary: Simple, repetitive, superlative-heavy
  common_phrases: ["Believe me", "Tremendous"]
knowledge_domains:
  politics: [American politics, Trade policy]
interaction_samples:
  - type: quote
    content: "I have the best words."
  - type: conversation
    content: |
      Q: What's your approach to international trade?
      A: Terrible trade deals, the worst.
"""

EVERY_FORM: dict[str, Any] = {
    "name": "Vera Voss",
    "description": "A test persona written in every shape the formats allow.",
    "personality": "Curious-trait-7 and stubborn-trait-8.",
    "personal_background": {
        "birth": "bg-birth-value",
        "career": {
            "early": ["bg-career-early-1", "bg-career-early-2"],
            "late": {"post": "bg-career-late-post"},
        },
        "education": [{"school": "bg-school-name", "year": 1961}],
        "married": True,
        "children": 3,
        "born_on": "1946-06-14",
    },
    "language_style": {
        "tone": "tone-value",
        "characteristics": ["char-value"],
        "sample_phrases": ["phrase-value"],
        "vocabulary": "vocab-value",
        "speaking_style": ["speaking-1", "speaking-2"],
        "common_phrases": ["common-1"],
        "language_preferences": "lang-pref-value",
        "writing_style": "writing-value",
        "humour": ["humour-value"],
    },
    "knowledge_domains": {"Domain One": ["topic-one"], "Domain Two": "topic-two"},
    "interaction_samples": [
        {"user": "pair-user-value", "assistant": "pair-assistant-value"},
        {"type": "quote", "content": "quote-content-value"},
        {
            "type": "conversation",
            "content": "Q: conv-question-value\nA: conv-answer-value\nstill-conv-answer",
        },
        {
            "type": "social_media",
            "content": "tweet-content-value",
            "platform": "platform-value",
            "date": "2016-05-04",
        },
        {"type": "speech", "content": "speech-content-value"},
        {"content": "untyped-content-value"},
    ],
    "scenario": "scenario-value with {{user}}",
    "greeting": "greeting-value",
    "system_prompt": "sysprompt-value. {{original}}",
    "post_history_instructions": "post-history-value",
    "tags": ["tag-value"],
    "extensions": {"some_tool": {"setting": "kept"}},
}


def test_the_issue_example_is_read(tmp_path: Path) -> None:
    path = tmp_path / "donald-trump.yaml"
    path.write_text(TRUMP, encoding="utf-8")
    persona = load_persona_file(path)
    assert persona.personal_background == {
        "birth": "June 14, 1946, Queens, New York City, USA",
        "profession": "Businessman, Politician, Television Personality",
    }
    assert persona.language_style is not None
    assert persona.language_style.further() == {
        "vocabulary": "Simple, repetitive, superlative-heavy",
        "common_phrases": ["Believe me", "Tremendous"],
    }
    assert [s.type for s in persona.interaction_samples] == ["quote", "conversation"]
    card = agent_card_to_dict(build_agent_card(persona, "http://hub"))
    assert [s["id"] for s in card["skills"]] == [
        "donald-trump-conversation",
        "donald-trump-politics",
    ]
    assert card["skills"][1]["tags"] == ["politics", "American politics", "Trade policy"]


def test_every_value_of_every_form_reaches_the_prompt() -> None:
    persona = Persona.from_data("vera", EVERY_FORM)
    prompt = render_system_prompt(persona)
    values: list[str] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)
        elif isinstance(value, str):
            values.append(value)

    # Every text as written, but those the prompt rewrites (checked below); not the tags
    # (the card's), greeting or post-history instructions (turns, tests/integration).
    left_out = (
        *("extensions", "tags", "greeting", "scenario", "system_prompt"),
        "post_history_instructions",
    )
    collect({k: v for k, v in EVERY_FORM.items() if k not in left_out})
    conversation = EVERY_FORM["interaction_samples"][2]["content"]
    types = {sample.get("type") for sample in EVERY_FORM["interaction_samples"]}  # labels
    missing = [
        value
        for value in values
        if value != conversation and value not in types and value not in prompt
    ]
    assert missing == []
    assert "scenario-value with User" in prompt  # {{user}} replaced
    for number in ("1961", "3", "yes"):  # numbers and booleans, as text
        assert number in prompt
    # Labels made of keys; a conversation's Q:/A: become the speakers.
    assert "Common phrases:" in prompt
    assert "Born on: 1946-06-14" in prompt
    assert "User: conv-question-value" in prompt
    assert "Vera Voss: conv-answer-value" in prompt
    assert "Social media (platform: platform-value, date: 2016-05-04):" in prompt
    # The card's system prompt opens it, with the hub's own opening in place of {{original}}.
    assert prompt.startswith("sysprompt-value. You are Vera Voss.")
    # Greeting and post-history instructions are not in the system prompt: they are turns.
    assert "greeting-value" not in prompt
    assert "post-history-value" not in prompt


def test_both_sample_shapes_give_exchanges() -> None:
    persona = Persona.from_data("vera", EVERY_FORM)
    exchanges = sample_exchanges(persona)
    assert ("pair-user-value", "pair-assistant-value") in exchanges
    assert ("conv-question-value", "conv-answer-value\nstill-conv-answer") in exchanges
    assert ("", "quote-content-value") in exchanges


def test_a_file_in_the_original_format_round_trips(tmp_path: Path) -> None:
    persona = Persona.from_data("vera", EVERY_FORM)
    path = tmp_path / "vera.yaml"
    path.write_text(dump_persona_yaml(persona), encoding="utf-8")
    again = load_persona_file(path)
    assert again == persona
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    # The shapes stay as written: a mapping background, further style keys in place.
    assert written["personal_background"]["career"]["late"] == {"post": "bg-career-late-post"}
    assert written["language_style"]["speaking_style"] == ["speaking-1", "speaking-2"]
    assert written["knowledge_domains"]["Domain Two"] == ["topic-two"]  # normalized


def test_yaml_dates_in_a_background_become_text(tmp_path: Path) -> None:
    path = tmp_path / "dated.yaml"
    data = persona_data()
    text = yaml.safe_dump({**data, "personal_background": {"born": "x"}}).replace(
        "born: x", "born: 1946-06-14"
    )
    path.write_text(text, encoding="utf-8")
    persona = load_persona_file(path)
    assert persona.personal_background == {"born": "1946-06-14"}
    json.dumps(persona.model_dump(mode="json"))


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Persona.from_data("x", data)
    return validation_problems(caught.value)


def test_an_unknown_top_level_key_is_an_error_that_names_it() -> None:
    assert problems({**persona_data(), "persnality": "typo"}) == ["persnality: unknown field"]


def test_unknown_keys_are_free_under_extensions() -> None:
    persona = Persona.from_data("x", {**persona_data(), "extensions": {"persnality": "kept"}})
    assert persona.extensions == {"persnality": "kept"}


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ({"user": "u"}, "interaction_samples[0]: assistant: Field required"),
        ({"assistant": "a"}, "interaction_samples[0]: user: Field required"),
        ({"type": "quote"}, "interaction_samples[0]: needs user and assistant, or content"),
        (
            {"user": "u", "assistant": "a", "content": "c"},
            "interaction_samples[0]: give either user and assistant, or content",
        ),
        ({"type": "quote", "content": " "}, "interaction_samples[0].content: must not be empty"),
        ({"content": "c", "platform": ["x"]}, "interaction_samples[0].platform: must be text"),
    ],
)
def test_bad_samples_say_what_is_wrong(sample: dict[str, Any], expected: str) -> None:
    (problem,) = problems({**persona_data(), "interaction_samples": [sample]})
    assert problem.startswith(expected), problem


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        ({"vocabulary": "x"}, "language_style.tone: Field required"),
        ({"tone": "t", "vocabulary": 3}, "language_style.vocabulary: must be text or a list"),
        ({"tone": "t", "vocabulary": ["a", {"b": 1}]}, "language_style.vocabulary: must be text"),
        ({"tone": "t", "vocabulary": ""}, "language_style.vocabulary: must not be empty"),
    ],
)
def test_bad_language_styles_say_what_is_wrong(style: dict[str, Any], expected: str) -> None:
    (problem,) = problems({**persona_data(), "language_style": style})
    assert problem.startswith(expected), problem


@pytest.mark.parametrize(
    ("background", "expected"),
    [
        ({}, "personal_background: must not be empty"),
        (["a"], "personal_background: must be text, or a mapping"),
        ("  ", "personal_background: must not be empty"),
    ],
)
def test_bad_backgrounds_say_what_is_wrong(background: Any, expected: str) -> None:
    (problem,) = problems({**persona_data(), "personal_background": background})
    assert problem.startswith(expected), problem
