"""Tavern character cards (V2, V3; JSON and PNG) to personas and back."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from persona_agent.errors import PersonaFileError
from persona_agent.personas.formats.lore_keys import regex_problem
from persona_agent.personas.formats.tavern import (
    CardSpec,
    card_png,
    card_to_persona,
    persona_to_card,
)
from persona_agent.personas.loader import (
    NoCardError,
    dump_persona_yaml,
    load_persona_file,
    read_persona,
)
from persona_agent.personas.model import Persona
from persona_agent.personas.prompt import render_system_prompt
from persona_agent.security.limits import Limits
from tests.personas import persona_data
from tests.personas.cards import (
    MIRA_V2,
    ORLA_V3,
    card_copy,
    decoded_chunk,
    encoded,
    picture,
    pixels,
    png_bytes,
    text_chunks,
)
from tests.personas.cards import card_png as make_card_png


def test_a_v2_card_maps_onto_the_persona() -> None:
    persona = card_to_persona("mira", MIRA_V2)
    data = MIRA_V2["data"]
    assert persona.name == "Captain Mira Voss"
    assert persona.description == data["description"]
    assert persona.personality == data["personality"]
    assert persona.scenario == data["scenario"]
    assert persona.greeting == data["first_mes"]
    assert persona.alternate_greetings == data["alternate_greetings"]
    assert persona.system_prompt == data["system_prompt"]
    assert persona.post_history_instructions == data["post_history_instructions"]
    assert persona.tags == data["tags"]
    assert persona.lore is not None
    assert len(persona.lore.entries) == 2
    assert [s.model_dump(exclude_none=True) for s in persona.interaction_samples] == [
        {"type": "conversation", "content": data["mes_example"]}
    ]
    kept = persona.extensions["character_card"]
    assert kept["data"]["creator_notes"] == data["creator_notes"]
    assert kept["data"]["extensions"] == data["extensions"]
    assert kept["create_date"] == MIRA_V2["create_date"]  # SillyTavern's top-level keys


@pytest.mark.parametrize("card", [MIRA_V2, ORLA_V3], ids=["v2", "v3"])
def test_import_then_export_gives_back_the_same_card(card: dict[str, Any]) -> None:
    persona = card_to_persona("x", card_copy(card))
    spec: CardSpec = "v3" if card["spec"] == "chara_card_v3" else "v2"
    assert persona_to_card(persona, spec) == card


@pytest.mark.parametrize("card", [MIRA_V2, ORLA_V3], ids=["v2", "v3"])
def test_import_then_export_through_a_yaml_file_gives_back_the_same_card(
    tmp_path: Path, card: dict[str, Any]
) -> None:
    persona = card_to_persona("x", card_copy(card))
    path = tmp_path / "x.yaml"
    path.write_text(dump_persona_yaml(persona), encoding="utf-8")
    again = load_persona_file(path)
    assert again == persona
    spec: CardSpec = "v3" if card["spec"] == "chara_card_v3" else "v2"
    assert persona_to_card(again, spec) == card


def test_an_edit_after_import_is_exported() -> None:
    persona = card_to_persona("mira", card_copy(MIRA_V2))
    edited = persona.model_copy(update={"scenario": "A new scenario."})
    card = persona_to_card(edited, "v2")
    assert card["data"]["scenario"] == "A new scenario."
    assert card["data"]["creator_notes"] == MIRA_V2["data"]["creator_notes"]


def test_a_v2_card_exported_as_v3_has_the_v3_fields() -> None:
    persona = card_to_persona("mira", card_copy(MIRA_V2))
    card = persona_to_card(persona, "v3")
    assert (card["spec"], card["spec_version"]) == ("chara_card_v3", "3.0")
    assert card["data"]["group_only_greetings"] == []
    assert card["data"]["name"] == "Captain Mira Voss"


def test_a_persona_of_this_hub_goes_to_a_card_and_comes_back_the_same() -> None:
    persona = Persona.from_data(
        "tess",
        {
            **persona_data(),
            "model": {"temperature": 0.3},
            "tools": {"allow": []},
            "card": {"examples": ["Ask me"]},
            "memory": {"token_budget": 200, "shared_with": ["einstein"], "tools": False},
            "extensions": {"mine": 1},
            "interaction_samples": [
                {"user": "Why test?", "assistant": "To know."},
                {"type": "quote", "content": "Trust, but verify."},
            ],
        },
    )
    specs: tuple[CardSpec, ...] = ("v2", "v3")
    for spec in specs:
        card = persona_to_card(persona, spec)
        # Tools that know only the card's text still get the background and knowledge.
        assert isinstance(persona.personal_background, str)
        assert persona.personal_background in card["data"]["description"]
        assert "# What you know" in card["data"]["description"]
        assert card["data"]["mes_example"].startswith("<START>\n{{user}}: ")
        assert card_to_persona("tess", card) == persona


def test_the_prompt_of_a_card_persona_has_its_parts_with_macros_replaced() -> None:
    prompt = render_system_prompt(card_to_persona("mira", card_copy(MIRA_V2)))
    assert prompt.startswith(
        "Write Captain Mira Voss's next reply in a space-salvage roleplay. "
        "You are Captain Mira Voss."
    )
    assert "Captain Mira Voss is the captain of the salvage ship Kestrel" in prompt
    assert "# Your personality\nDry, decisive" in prompt
    assert "# The scenario\nUser has just signed on" in prompt
    assert "User: Why salvage?\nCaptain Mira Voss: Because the dead don't haggle." in prompt
    assert "{{" not in prompt


def bad(card: Any) -> list[str]:
    with pytest.raises(PersonaFileError) as caught:
        read_persona(None, _json(card), source="card.json", fmt="json")
    return caught.value.problems


def _json(value: Any) -> bytes:
    import json

    return json.dumps(value).encode()


def test_a_v1_card_is_refused_with_what_to_do() -> None:
    v1 = {k: MIRA_V2[k] for k in ("name", "description", "personality", "first_mes")}
    (problem,) = bad(v1)
    assert "V1 character card" in problem
    assert "export it as a V2 or V3 card" in problem


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"spec": "chara_card_v9"}, "spec: 'chara_card_v9' is not a supported card format"),
        ({"data": "x"}, "data: must be a mapping"),
        ({"data": {**MIRA_V2["data"], "name": ""}}, "data.name: must be text, not empty"),
        ({"data": {**MIRA_V2["data"], "personality": 3}}, "data.personality: must be text"),
        ({"data": {**MIRA_V2["data"], "tags": "a"}}, "data.tags: must be a list of text"),
        (
            {"data": {**MIRA_V2["data"], "character_book": {"entries": [{"keys": "k"}]}}},
            "data.character_book.entries[0]",
        ),
    ],
)
def test_bad_cards_name_the_field(change: dict[str, Any], expected: str) -> None:
    problems = bad({**card_copy(MIRA_V2), **change})
    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_card_id_comes_from_its_name_or_is_given() -> None:
    raw = _json(MIRA_V2)
    assert read_persona(None, raw, source="x.json", fmt="json").persona.id == "captain-mira-voss"
    assert read_persona("mira", raw, source="x.json", fmt="json").persona.id == "mira"
    nameless = {**card_copy(MIRA_V2), "data": {**MIRA_V2["data"], "name": "???"}}
    (problem,) = bad(nameless)
    assert "no letter a-z or digit to make a persona id of" in problem


# PNG cards


def test_a_png_card_gives_the_persona_and_its_picture() -> None:
    image = picture()
    loaded = read_persona(None, make_card_png(ORLA_V3, image), source="orla.png", fmt="png")
    assert loaded.persona.name == "Orla of the Lighthouse"
    assert loaded.image is not None
    assert pixels(loaded.image.data) == pixels(png_bytes(image))
    assert text_chunks(loaded.image.data) == {}  # the avatar never carries the card


def test_ccv3_wins_over_chara() -> None:
    raw = png_bytes(picture(), {"chara": encoded(MIRA_V2), "ccv3": encoded(ORLA_V3)})
    assert read_persona(None, raw, source="c.png", fmt="png").persona.name.startswith("Orla")


@pytest.mark.parametrize("spec", ["v2", "v3"])
def test_png_export_keeps_the_pixels_and_the_card(spec: str) -> None:
    image = picture((30, 20), "RGB")
    loaded = read_persona(None, make_card_png(MIRA_V2, image), source="m.png", fmt="png")
    exported = card_png(loaded.persona, spec, loaded.image)  # type: ignore[arg-type]
    assert pixels(exported) == pixels(png_bytes(image))
    chunks = text_chunks(exported)
    assert decoded_chunk(exported, "chara")["spec"] == "chara_card_v2"
    if spec == "v3":
        assert decoded_chunk(exported, "ccv3")["spec"] == "chara_card_v3"
    else:
        assert "ccv3" not in chunks
        assert decoded_chunk(exported, "chara") == MIRA_V2
    again = read_persona(None, exported, source="again.png", fmt="png").persona
    if spec == "v2":
        assert again == loaded.persona
    else:  # the same persona, kept as the V3 card it came back as
        ignore = {"extensions", "version"}
        assert again.model_dump(exclude=ignore) == loaded.persona.model_dump(exclude=ignore)


def test_a_persona_without_an_avatar_exports_on_a_card_drawn_with_its_name() -> None:
    persona = Persona.from_data("tess", persona_data())
    exported = card_png(persona, "v3", None)
    mode, size, data = pixels(exported)
    assert size == (400, 600)
    assert read_persona(None, exported, source="t.png", fmt="png").persona.name == persona.name
    # Not a plain block (issue 50.7): a shaded picture, its initials and its name in white.
    assert mode == "RGB"
    colours = {data[i : i + 3] for i in range(0, len(data), 3)}
    assert len(colours) > 50
    assert b"\xff\xff\xff" in colours  # the name's letters
    other = Persona.from_data("tess", {**persona_data(), "name": "Someone Else Entirely"})
    assert pixels(card_png(other, "v3", None))[2] != data  # the name is drawn


def png_problem(raw: bytes, limits: Limits | None = None) -> str:
    with pytest.raises(PersonaFileError) as caught:
        read_persona(None, raw, source="card.png", fmt="png", limits=limits or Limits())
    (problem,) = caught.value.problems
    return problem


def test_a_png_without_a_card_says_so() -> None:
    with pytest.raises(NoCardError) as caught:
        read_persona(None, png_bytes(picture()), source="plain.png", fmt="png")
    assert "no character card in it (no 'ccv3' or 'chara' text chunk)" in str(caught.value)


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ({"chara": "not base64!!"}, "the 'chara' chunk is not base64"),
        ({"chara": base64.b64encode(b"\xff\xfe\x00").decode()}, "not base64 of UTF-8 text"),
        ({"chara": base64.b64encode(b"{not json").decode()}, "JSON syntax error"),
        ({"ccv3": base64.b64encode(b"[1, 2]").decode()}, "top level must be a mapping"),
        ({"chara": base64.b64encode(b'{"a": 1}').decode()}, "is not a character card"),
    ],
)
def test_bad_card_chunks_say_what_is_wrong(chunks: dict[str, str], expected: str) -> None:
    assert expected in png_problem(png_bytes(picture(), chunks))


def test_damaged_and_foreign_files_say_what_is_wrong() -> None:
    good = make_card_png(MIRA_V2)
    assert "not a PNG file" in png_problem(b"GIF89a" + good[6:])
    assert "damaged" in png_problem(good[: len(good) // 2]) or "not an image" in png_problem(
        good[: len(good) // 2]
    )


def test_a_card_over_the_image_limit_is_refused_unread() -> None:
    problem = png_problem(b"\x89PNG\r\n\x1a\n" + b"\0" * (50 * 1024 * 1024))
    assert "more than the limit of 16777216 bytes (PERSONA_AGENT_MAX_IMAGE_BYTES)" in problem


def test_an_image_of_too_many_pixels_is_refused_before_it_is_decoded() -> None:
    import io

    from PIL import Image

    output = io.BytesIO()
    Image.new("1", (8000, 8000)).save(output, "PNG")  # small file, 64 million pixels
    raw = png_bytes(Image.open(io.BytesIO(output.getvalue())), {"chara": encoded(MIRA_V2)})
    assert "8000 × 8000 pixels" in png_problem(raw)


# The round trip, for any card


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_name = st.text(st.characters(min_codepoint=0x41, max_codepoint=0x7A), min_size=1, max_size=20)
_key = _text.filter(lambda key: regex_problem(key, use_regex=True, sensitive=False) is None)
"""A key RE2 takes, should its entry be ``use_regex``: a card with another is refused."""
_entry = st.fixed_dictionaries(
    {"keys": st.lists(_key, max_size=3), "content": _text, "extensions": st.just({})},
    optional={
        "enabled": st.booleans(),
        "insertion_order": st.integers(-100, 100),
        "case_sensitive": st.booleans(),
        "name": _text,
        "priority": st.integers(0, 100),
        "id": st.integers(0, 100),
        "comment": _text,
        "selective": st.booleans(),
        "secondary_keys": st.lists(_key, max_size=2),
        "constant": st.booleans(),
        "position": st.sampled_from(["before_char", "after_char"]),
        "use_regex": st.booleans(),
        "probability": st.integers(0, 100),
    },
)
_book = st.fixed_dictionaries(
    {"entries": st.lists(_entry, max_size=3)},
    optional={
        "name": _text,
        "description": _text,
        "scan_depth": st.integers(0, 10),
        "token_budget": st.integers(0, 1000),
        "recursive_scanning": st.booleans(),
        "extensions": st.dictionaries(_name, _text, max_size=2),
    },
)
_data = st.fixed_dictionaries(
    {
        "name": _name,
        "description": _text,
        "personality": _text,
        "scenario": _text,
        "first_mes": _text,
        "mes_example": _text,
        "creator_notes": _text,
        "system_prompt": _text,
        "post_history_instructions": _text,
        "alternate_greetings": st.lists(_text, max_size=3),
        "tags": st.lists(_text, max_size=3),
        "creator": _text,
        "character_version": _text,
        "extensions": st.dictionaries(_name, st.one_of(_text, st.integers()), max_size=3),
    },
    optional={
        "character_book": _book,
        "nickname": _text,
        "assets": st.lists(
            st.fixed_dictionaries(
                {"type": _name, "uri": _text, "name": _name, "ext": st.just("png")}
            ),
            max_size=2,
        ),
        "source": st.lists(_text, max_size=2),
        "creation_date": st.integers(0, 2**31),
        "x_unknown_field": _text,
    },
)
_cards = st.builds(
    lambda spec, data, top: {**top, **spec, "data": data},
    st.sampled_from(
        [
            {"spec": "chara_card_v2", "spec_version": "2.0"},
            {"spec": "chara_card_v3", "spec_version": "3.0"},
        ]
    ),
    _data,
    st.dictionaries(st.sampled_from(["avatar", "chat", "create_date", "fav"]), _text, max_size=2),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(card=_cards)
def test_any_card_comes_back_the_same(card: dict[str, Any]) -> None:
    if card["spec"] == "chara_card_v3":
        card["data"].setdefault("group_only_greetings", [])
    persona = card_to_persona("generated", card)
    spec: CardSpec = "v3" if card["spec"] == "chara_card_v3" else "v2"
    assert persona_to_card(persona, spec) == card
    render_system_prompt(persona)  # whatever the card says, the prompt renders
