"""The persona model: ids, validation rules, the content version."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from persona_agent.personas.loader import validation_problems
from persona_agent.personas.model import (
    InteractionSample,
    Persona,
    is_valid_persona_id,
    slugify,
)
from tests.personas import persona_data

GOOD_IDS = ["a", "7", "ada-lovelace", "x1-2", "a" * 63, "a--b", "albert-einstein-2"]
BAD_IDS = [
    "",
    "-ada",
    "Ada",
    "ada_lovelace",
    "ada lovelace",
    "a" * 64,
    "..",
    "../x",
    "x/../y",
    "x/y",
    "x\\y",
    "/etc/passwd",
    ".hidden",
    "x.yaml",
    "ada\n",
    "\nada",
    "café",
]


def problems(persona_id: str, data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Persona.from_data(persona_id, data)
    return validation_problems(caught.value)


@pytest.mark.parametrize("persona_id", GOOD_IDS)
def test_good_ids_are_accepted(persona_id: str) -> None:
    assert is_valid_persona_id(persona_id)
    assert Persona.from_data(persona_id, persona_data()).id == persona_id


@pytest.mark.parametrize("persona_id", BAD_IDS)
def test_bad_ids_and_path_like_ids_are_refused(persona_id: str) -> None:
    assert not is_valid_persona_id(persona_id)
    (problem,) = problems(persona_id, persona_data())
    assert problem.startswith("id: ")
    assert "is not a valid persona id" in problem


def test_a_bad_id_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a valid persona id"):
        Persona.from_data("../escape", persona_data())


def test_authored_data_may_repeat_its_own_id_but_no_other() -> None:
    assert Persona.from_data("tess", persona_data(id="tess")).id == "tess"
    (problem,) = problems("tess", persona_data(id="other"))
    assert problem.startswith("id: 'other' does not match the persona id 'tess'")


def test_authored_data_may_not_set_the_version() -> None:
    (problem,) = problems("tess", persona_data(version="1234"))
    assert problem.startswith("version: must not be given")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"name": ""}, "name: must not be empty"),
        ({"description": "   "}, "description: must not be empty"),
        ({"language_style": {}}, "language_style.tone: Field required"),
        ({"language_style": {"tone": "x", "accent": 1}}, "language_style.accent: must be text"),
        ({"model": {"nmae": "gpt"}}, "model.nmae: unknown field"),
        ({"nickname": "Tessie"}, "nickname: unknown field"),
        ({"knowledge_domains": ["a"]}, "knowledge_domains: Input should be a valid dictionary"),
        ({"knowledge_domains": {"Maths": []}}, "knowledge_domains.Maths: at least one topic"),
        ({"knowledge_domains": {"Maths": ["", "x"]}}, "knowledge_domains.Maths[0]: must not"),
        (
            {"knowledge_domains": {"Solid state": ["a"], "solid-state": ["b"]}},
            "knowledge_domains: domains 'Solid state' and 'solid-state' have the same skill id",
        ),
        ({"knowledge_domains": {"???": ["a"]}}, "knowledge_domains: domain '???' needs"),
        ({"knowledge_domains": {"Conversation": ["a"]}}, "reserved for the conversation skill"),
        (
            {"interaction_samples": [{"user": "a", "assistant": "b"}, {"user": "c"}]},
            "interaction_samples[1]: assistant: Field required",
        ),
        ({"model": {"temperature": 2.5}}, "model.temperature: Input should be less than or equal"),
        ({"model": {"max_tokens": 0}}, "model.max_tokens: Input should be greater than or equal"),
        ({"tools": {"allow": "everything"}}, "tools.allow: Input should be a valid list"),
        (
            {
                "card": {
                    "skills": [{"id": "tess-software-testing", "name": "n", "description": "d"}]
                }
            },
            "card.skills[0].id: 'tess-software-testing' is already the id of another skill",
        ),
    ],
)
def test_invalid_data_names_the_field_and_the_reason(
    overrides: dict[str, Any], expected: str
) -> None:
    found = problems("tess", persona_data(**overrides))
    assert any(problem.startswith(expected) or expected in problem for problem in found), found


def test_every_problem_is_reported_at_once() -> None:
    data = persona_data(nickname="x")
    del data["name"], data["description"]
    found = problems("tess", data)
    assert {"name: Field required", "description: Field required", "nickname: unknown field"} <= (
        set(found)
    )


@pytest.mark.parametrize(
    ("domain", "slug"),
    [
        ("Theoretical physics", "theoretical-physics"),
        ("  Peace & Society!  ", "peace-society"),
        ("The Socratic method", "the-socratic-method"),
        ("C++ / Rust", "c-rust"),
        ("Radio-chemistry", "radio-chemistry"),
        ("Ünïcode 2", "n-code-2"),
    ],
)
def test_domain_slug(domain: str, slug: str) -> None:
    assert slugify(domain) == slug
    assert Persona.from_data("tess", persona_data()).domain_slug(domain) == slug


def test_version_is_stable_for_equal_content() -> None:
    first = Persona.from_data("tess", persona_data())
    reordered = dict(reversed(list(persona_data().items())))
    second = Persona.from_data("tess", reordered)
    with_defaults = Persona.from_data("tess", persona_data(model={}, interaction_samples=[]))
    assert len(first.version) == 16
    assert first.version == second.version == with_defaults.version
    assert first == second
    assert hash(first) == hash(second)


@pytest.mark.parametrize(
    "overrides",
    [
        {"name": "Tess Tested"},
        {"description": "Another description."},
        {"language_style": {"tone": "plain", "sample_phrases": ["Well then."]}},
        {"knowledge_domains": {"Software testing": ["fixtures", "unit tests"]}},
        {"knowledge_domains": {"Software testing": ["unit tests", "fixtures"], "Art": ["x"]}},
        {"interaction_samples": [{"user": "Hi", "assistant": "Hello."}]},
        {"model": {"temperature": 0.5}},
        {"tools": {"allow": []}},
        {"card": {"examples": ["Test me"]}},
    ],
)
def test_any_change_of_content_changes_the_version(overrides: dict[str, Any]) -> None:
    base = Persona.from_data("tess", persona_data())
    changed = Persona.from_data("tess", persona_data(**overrides))
    assert changed.version != base.version


def test_the_id_is_part_of_the_version() -> None:
    assert (
        Persona.from_data("tess", persona_data()).version
        != Persona.from_data("tess-2", persona_data()).version
    )


def test_version_is_always_computed_from_content() -> None:
    persona = Persona.from_data("tess", persona_data())
    revalidated = Persona.model_validate({**persona.model_dump(), "version": "stale"})
    assert revalidated.version == persona.version
    assert Persona.model_validate_json(persona.model_dump_json()) == persona


def test_model_copy_with_update_revalidates_and_recomputes_the_version() -> None:
    persona = Persona.from_data("tess", persona_data())
    renamed = persona.model_copy(update={"name": "Tess Renamed"})
    assert renamed.name == "Tess Renamed"
    assert renamed.version == Persona.from_data("tess", persona_data(name="Tess Renamed")).version
    assert persona.model_copy() == persona
    with pytest.raises(ValidationError):
        persona.model_copy(update={"knowledge_domains": {"Maths": []}})


def test_personas_are_immutable() -> None:
    persona = Persona.from_data(
        "tess", persona_data(interaction_samples=[{"user": "a", "assistant": "b"}])
    )
    with pytest.raises(ValidationError):
        persona.name = "Other"
    assert persona.language_style is not None
    with pytest.raises(ValidationError):
        persona.language_style.tone = "loud"
    sample = persona.interaction_samples[0]
    assert isinstance(sample, InteractionSample)
    with pytest.raises(ValidationError):
        sample.user = "c"


def test_defaults() -> None:
    persona = Persona.from_data("tess", persona_data())
    assert persona.interaction_samples == []
    assert persona.model.name is None
    assert persona.model.temperature is None
    assert persona.model.max_tokens is None
    assert persona.tools.allow is None
    assert persona.tools.required is False
    assert persona.card.skills == []
    assert persona.card.examples == []
    assert persona.language_style is not None
    assert persona.language_style.characteristics == []
    bare = Persona.from_data("bare", {"name": "Bare", "description": "Only the two required."})
    assert bare.personal_background is None
    assert bare.language_style is None
    assert bare.knowledge_domains == {}
    assert bare.lore is None
    assert bare.avatar is None
    assert bare.extensions == {}
