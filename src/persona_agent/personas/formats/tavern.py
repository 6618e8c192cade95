"""Tavern character cards (V2 ``chara_card_v2``, V3 ``chara_card_v3``) to personas and back.

A card's ``data`` fields that have a place in the persona go there::

    name -> name                      first_mes -> greeting
    description -> description        alternate_greetings -> alternate_greetings
    personality -> personality        system_prompt -> system_prompt
    scenario -> scenario              post_history_instructions -> post_history_instructions
    mes_example -> interaction_samples (one ``conversation`` sample, the text as it is)
    tags -> tags                      character_book -> lore

Everything else (``creator_notes``, ``creator``, ``character_version``, the card's own
``extensions``, V3's ``assets``, ``nickname``, ..., any unknown field, and a field left
blank) is kept verbatim under the persona's ``extensions.character_card``, so that
exporting the persona gives back the same card. What a persona has and a card has not
(background, language style, knowledge domains, model and tool settings) travels in the
card's ``data.extensions.persona_agent``; a card this hub exported comes back as the same
persona.

The PNG container is :mod:`persona_agent.personas.formats.png`; this module works on the JSON.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Literal, TypeGuard

from pydantic import ValidationError

from persona_agent.personas.formats.png import CleanImage, placeholder_image, png_with_chunks
from persona_agent.personas.model import (
    Persona,
    is_valid_persona_id,
    slugify,
    validation_problems,
)
from persona_agent.personas.prompt import render_profile
from persona_agent.security.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "CARD_SPECS",
    "CardError",
    "CardSpec",
    "card_id",
    "card_png",
    "card_spec",
    "card_to_persona",
    "looks_like_card",
    "persona_to_card",
]

CardSpec = Literal["v2", "v3"]

CARD_SPECS: dict[CardSpec, tuple[str, str]] = {
    "v2": ("chara_card_v2", "2.0"),
    "v3": ("chara_card_v3", "3.0"),
}
"""Each format: its ``spec`` and ``spec_version``."""

KEPT = "character_card"
"""The persona's ``extensions`` key that holds what of a card has no place in the persona."""
NATIVE = "persona_agent"
"""The card's ``data.extensions`` key that holds what of a persona has no place in a card."""

_TEXT_FIELDS = {
    "name": "name",
    "description": "description",
    "personality": "personality",
    "scenario": "scenario",
    "first_mes": "greeting",
    "system_prompt": "system_prompt",
    "post_history_instructions": "post_history_instructions",
}
_LIST_FIELDS = {"alternate_greetings": "alternate_greetings", "tags": "tags"}
_CARD_FIELD = {
    **{field: key for key, field in _TEXT_FIELDS.items()},
    **{field: key for key, field in _LIST_FIELDS.items()},
    "lore": "character_book",
    "interaction_samples": "mes_example",
}
"""Persona field -> card ``data`` key: where a persona's problem is in the card."""

_V1_FIELDS = ("char_name", "char_persona", "char_greeting", "world_scenario", "example_dialogue")
_V2_TEXT_DEFAULTS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
)


class CardError(ValueError):
    """The card cannot become a persona; ``problems`` says why, one per field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def looks_like_card(data: Any) -> bool:
    """Whether parsed JSON is a character card of any version (not a persona file)."""
    if not isinstance(data, dict):
        return False
    spec = data.get("spec")
    if isinstance(spec, str) and spec.startswith("chara_card"):
        return True
    return any(key in data for key in (*_V1_FIELDS, "first_mes", "mes_example"))


def card_spec(card: dict[str, Any]) -> CardSpec:
    """The card's format.

    Raises:
        CardError: a V1 card, an unknown ``spec``, or no ``data`` mapping.
    """
    spec = card.get("spec")
    if spec is None:
        raise CardError(
            [
                "a V1 character card (no 'spec' field) is not supported: open it in the tool "
                "that made it and export it as a V2 or V3 card (spec chara_card_v2 or "
                "chara_card_v3)"
            ]
        )
    for name, (value, _) in CARD_SPECS.items():
        if spec == value:
            if not isinstance(card.get("data"), dict):
                raise CardError(["data: must be a mapping (the card's fields)"])
            return name
    raise CardError(
        [f"spec: {spec!r} is not a supported card format (chara_card_v2, chara_card_v3)"]
    )


def card_to_persona(
    persona_id: str, card: dict[str, Any], *, limits: Limits = DEFAULT_LIMITS
) -> Persona:
    """The persona a V2 or V3 card describes (without its avatar: that is the PNG's).

    Raises:
        CardError: the card is not V2 or V3, a field has the wrong type, it has no name,
            its lorebook is invalid, or it is over ``limits``; problems name the card's
            fields (``data.name``).
    """
    spec = card_spec(card)
    placed, kept_data = _split(card["data"])
    if "name" not in placed:
        raise CardError(["data.name: must be text, not empty (the character's name)"])
    placed.setdefault("description", placed["name"])  # a blank one is kept and given back
    kept = {key: value for key, value in card.items() if key != "data"}
    for candidate in _from_native(placed, kept, kept_data):
        try:
            persona = Persona.from_data(persona_id, candidate, limits=limits)
        except ValidationError:
            continue
        if persona_to_card(persona, spec) == card:
            return persona
    try:
        return Persona.from_data(
            persona_id,
            {**placed, "extensions": {KEPT: {**kept, "data": kept_data}}},
            limits=limits,
        )
    except ValidationError as error:
        raise CardError(_card_problems(error)) from None


def _from_native(
    placed: dict[str, Any], kept: dict[str, Any], kept_data: dict[str, Any]
) -> list[dict[str, Any]]:
    """The personas a card may be the export of, when it carries a persona's own fields
    (``data.extensions.persona_agent``): the persona alone (a card this hub exported),
    then with what else of the card it kept."""
    extensions = kept_data.get("extensions")
    native = extensions.get(NATIVE) if _is_map(extensions) else None
    if not _is_map(native) or not _is_map(extensions):
        return []
    own = native.get("extensions")
    rest = {**kept_data, "extensions": {k: v for k, v in extensions.items() if k != NATIVE}}
    with_kept = {**(own if _is_map(own) else {}), KEPT: {**kept, "data": rest}}
    return [{**placed, **native}, {**placed, **native, "extensions": with_kept}]


def persona_to_card(persona: Persona, spec: CardSpec) -> dict[str, Any]:
    """The persona as a V2 or V3 card (JSON data; the PNG container is separate).

    A persona imported from a card gives back that card, with the persona's changes since.
    """
    kept = persona.extensions.get(KEPT)
    card: dict[str, Any] = {}
    data: dict[str, Any] = {}
    from_card = _is_map(kept) and _is_map(kept.get("data"))
    if _is_map(kept) and from_card:
        card = copy.deepcopy({k: v for k, v in kept.items() if k != "data"})
        data = copy.deepcopy(kept["data"])
    native = _native_fields(persona)
    description = persona.description
    profile = render_profile(persona)
    if profile:  # background, speech, knowledge: for tools that know only the card's text
        description = f"{description.strip()}\n\n{profile}"
        native["description"] = persona.description
    blank_kept = "description" in data and persona.description == persona.name
    data["name"] = persona.name
    if not blank_kept:
        data["description"] = description
    for key, field in _TEXT_FIELDS.items():
        value = getattr(persona, field)
        if key not in ("name", "description") and value is not None:
            data[key] = value
    for key, field in _LIST_FIELDS.items():
        if getattr(persona, field):
            data[key] = list(getattr(persona, field))
    if persona.interaction_samples:
        data["mes_example"] = _mes_example(persona)
    if persona.lore is not None:
        data["character_book"] = persona.lore.model_dump(mode="json", exclude_defaults=True)
    if native:
        extensions = data.get("extensions")
        data["extensions"] = {**(extensions if _is_map(extensions) else {}), NATIVE: native}
    if not from_card:
        for key in _V2_TEXT_DEFAULTS:
            data.setdefault(key, "")
        data.setdefault("alternate_greetings", [])
        data.setdefault("tags", [])
        data.setdefault("creator", "")
        data.setdefault("character_version", "")
        data.setdefault("extensions", {})
    name, version = CARD_SPECS[spec]
    if spec == "v3":
        data.setdefault("group_only_greetings", [])
    if card.get("spec") != name:
        card["spec"], card["spec_version"] = name, version
    card.setdefault("spec_version", version)
    return {
        "spec": card.pop("spec"),
        "spec_version": card.pop("spec_version"),
        **card,
        "data": data,
    }


def card_png(persona: Persona, spec: CardSpec, image: CleanImage | None) -> bytes:
    """The persona as a PNG card: its avatar (or a card drawn with its name) with the card in a text
    chunk, ``chara`` for V2; for V3, ``ccv3`` and a V2 copy in ``chara`` for older tools."""
    chunks = {"chara": _json(persona_to_card(persona, "v2"))}
    if spec == "v3":
        chunks = {"ccv3": _json(persona_to_card(persona, "v3")), **chunks}
    picture = image.data if image is not None else placeholder_image(persona.id, persona.name)
    return png_with_chunks(picture, chunks)


def card_id(card: dict[str, Any]) -> str:
    """The persona id a card is given when none is asked for: its name as a slug.

    Raises:
        CardError: the name has no letter or digit to make an id of.
    """
    card_spec(card)
    name = card["data"].get("name")
    if not isinstance(name, str) or not name.strip():
        raise CardError(["data.name: must be text, not empty (the character's name)"])
    slug = slugify(name)[:63].strip("-")
    if not is_valid_persona_id(slug):
        raise CardError(
            ["data.name: has no letter a-z or digit to make a persona id of; give the id"]
        )
    return slug


def _json(card: dict[str, Any]) -> str:
    return json.dumps(card, ensure_ascii=False, separators=(",", ":"))


def _is_map(value: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)


def _split(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The card's fields that go into the persona (as persona fields), and the rest."""
    placed: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in data.items():
        if key in _TEXT_FIELDS or key == "mes_example":
            if not isinstance(value, str):
                problems.append(f"data.{key}: must be text")
            elif not value.strip():
                kept[key] = value
            elif key == "mes_example":
                placed["interaction_samples"] = [{"type": "conversation", "content": value}]
            else:
                placed[_TEXT_FIELDS[key]] = value
        elif key in _LIST_FIELDS:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                problems.append(f"data.{key}: must be a list of text")
            elif value and all(item.strip() for item in value):
                placed[_LIST_FIELDS[key]] = value
            else:
                kept[key] = value
        elif key == "character_book" and value is not None:
            placed["lore"] = value
        else:
            kept[key] = value
    if problems:
        raise CardError(problems)
    return placed, kept


def _native_fields(persona: Persona) -> dict[str, Any]:
    """What of the persona a card has no field for, as persona file content."""
    data = persona.model_dump(
        mode="json", exclude={"id", "version", "avatar"}, exclude_defaults=True
    )
    native = {
        key: value for key, value in data.items() if key not in _CARD_FIELD and key != "extensions"
    }
    own = {key: value for key, value in persona.extensions.items() if key != KEPT}
    if own:
        native["extensions"] = own
    samples = persona.interaction_samples
    if samples and not (len(samples) == 1 and _verbatim(samples[0].model_dump(exclude_none=True))):
        native["interaction_samples"] = data["interaction_samples"]
    return native


def _verbatim(sample: dict[str, Any]) -> bool:
    """Whether a sample is a card's ``mes_example`` as it was imported."""
    return set(sample) == {"type", "content"} and sample["type"] == "conversation"


def _mes_example(persona: Persona) -> str:
    """The interaction samples in the card's example-dialogue form."""
    blocks = []
    for sample in persona.interaction_samples:
        if sample.user is not None and sample.assistant is not None:
            blocks.append(f"<START>\n{{{{user}}}}: {sample.user}\n{{{{char}}}}: {sample.assistant}")
        elif sample.type == "conversation" and len(persona.interaction_samples) == 1:
            return sample.content or ""
        else:
            blocks.append(f"<START>\n{{{{char}}}}: {sample.content}")
    return "\n".join(blocks)


def _card_problems(error: ValidationError) -> list[str]:
    return validation_problems(error, {field: f"data.{key}" for field, key in _CARD_FIELD.items()})
