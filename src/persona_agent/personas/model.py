"""The persona model: what a persona file may say, validated.

One model reads both shapes people write persona files in: this hub's own and the
original persona-agent format (``personal_background`` as a mapping, any further keys
under ``language_style``, ``{type, content}`` interaction samples). It also has a place
for what character cards carry (personality, scenario, greetings, a lorebook, an
avatar); what has no place goes under ``extensions``, the one mapping whose keys are
free. Any other unknown key is an error that names it. Its field types are in
:mod:`~persona_agent.personas.field_types`, its sections in
:mod:`~persona_agent.personas.sections`.

A persona's id is its file stem, a slug, so no id can name a path outside the
persona directory. Its ``version`` is a hash of its content, computed on
validation, so any change of content gives a new version (used as an ETag).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from persona_agent.personas.bounds import check_bounds
from persona_agent.personas.field_types import (
    AVATAR_PATTERN,
    PERSONA_ID_PATTERN,
    PERSONA_ID_RULE,
    AvatarName,
    Background,
    FreeKeys,
    PersonaId,
    Text,
    Topics,
    checked_persona_id,
    is_valid_persona_id,
    slugify,
)
from persona_agent.personas.formats.lorebook import Lorebook
from persona_agent.personas.sections import (
    CardSettings,
    CardSkill,
    InteractionSample,
    LanguageStyle,
    MemorySettings,
    ModelSettings,
    PanelSettings,
    PersonaLimits,
    ToolSettings,
    VoiceSettings,
)
from persona_agent.security.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "AVATAR_PATTERN",
    "CONVERSATION_SKILL",
    "MAX_PROBLEMS",
    "PERSONA_ID_PATTERN",
    "PERSONA_ID_RULE",
    "CardSettings",
    "CardSkill",
    "InteractionSample",
    "LanguageStyle",
    "MemorySettings",
    "ModelSettings",
    "PanelSettings",
    "Persona",
    "PersonaLimits",
    "ToolSettings",
    "VoiceSettings",
    "is_valid_persona_id",
    "slugify",
    "validation_problems",
]

CONVERSATION_SKILL = "conversation"
"""The slug of the agent card's conversation skill; no knowledge domain may use it."""

_AUTHORED = "persona_agent.authored_id"  # validation context key set by Persona.from_data


_NO_LIMITS = PersonaLimits()
_NO_MODEL_SETTINGS = ModelSettings()
_NO_TOOL_SETTINGS = ToolSettings()
_NO_CARD_SETTINGS = CardSettings()
_NO_MEMORY_SETTINGS = MemorySettings()
"""Shared defaults (immutable models, never mutated): a copy per persona costs start-up time."""


class Persona(BaseModel):
    """A validated persona. Immutable; ``version`` always matches the content.

    Build one from authored data (a file, an upload) with :meth:`from_data`.
    ``version`` is computed on validation, whatever value is given, and
    ``model_copy(update=...)`` validates again, so a changed persona never
    carries a stale version.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    id: str = Field(json_schema_extra={"pattern": PERSONA_ID_PATTERN})
    name: Text
    description: Text
    personality: Text | None = None
    personal_background: Background | None = None
    language_style: LanguageStyle | None = None
    knowledge_domains: dict[Text, Topics] = Field(default_factory=dict)
    interaction_samples: list[InteractionSample] = Field(default_factory=list)
    scenario: Text | None = None
    greeting: Text | None = None
    """The persona's first message in a new conversation (a card's ``first_mes``)."""
    alternate_greetings: list[Text] = Field(default_factory=list)
    system_prompt: Text | None = None
    """Replaces the opening of the system prompt; ``{{original}}`` stands for the hub's own."""
    post_history_instructions: Text | None = None
    """Sent as a system message after the conversation, before the model answers."""
    tags: list[Text] = Field(default_factory=list)
    lore: Lorebook | None = None
    """Lore entries put into the prompt when their keys come up (a card's ``character_book``)."""
    avatar: AvatarName | None = None
    """An image file beside the persona file, served at ``/a2a/{id}/avatar``."""
    access: Literal["public", "authenticated"] | None = None
    """Who may talk to it over A2A; ``None``: the hub's default (``PERSONA_AGENT_A2A_ACCESS``)."""
    model: ModelSettings = Field(default_factory=lambda: _NO_MODEL_SETTINGS)
    tools: ToolSettings = Field(default_factory=lambda: _NO_TOOL_SETTINGS)
    card: CardSettings = Field(default_factory=lambda: _NO_CARD_SETTINGS)
    limits: PersonaLimits = Field(default_factory=lambda: _NO_LIMITS)
    memory: MemorySettings = Field(default_factory=lambda: _NO_MEMORY_SETTINGS)
    """What it remembers of its callers, with whom it shares that (docs/memory.md)."""
    consult: list[PersonaId] | Literal["*"] = Field(default_factory=list)
    """Personas of the hub this one may consult (a tool each), or ``"*"``: every other."""
    agents: list[Text] = Field(default_factory=list)
    """Agents outside the hub this one may call (names from ``PERSONA_AGENT_AGENTS_FILE``)."""
    panel: PanelSettings | None = None
    """Makes this persona a panel of others (docs/collaboration.md)."""
    voice: VoiceSettings | bool | None = None
    """The voice its answers are spoken with, for clients that accept audio
    (docs/media.md#voice): ``{name, speed}``; ``false``: never spoken; ``None`` or ``true``:
    the hub's default voice."""
    extensions: FreeKeys = Field(default_factory=dict)
    """Free keys: what other tools keep here (a character card's fields that have no place
    in the persona, under ``character_card``) is kept and written back."""
    version: str = ""

    @classmethod
    def from_data(
        cls, persona_id: str, data: Mapping[str, Any], *, limits: Limits = DEFAULT_LIMITS
    ) -> Self:
        """A persona from authored data (a parsed file or upload) and its id.

        ``data`` must not contain ``version``; it may contain ``id`` only if it
        equals ``persona_id``. ``limits``: how large its rendered text and its lorebook
        may be (:func:`~persona_agent.personas.bounds.check_bounds`).

        Raises:
            pydantic.ValidationError: a field is missing or invalid, including a
                bad ``persona_id`` (reported on the field ``id``), or over ``limits``.
        """
        values = {**data, "id": data.get("id", persona_id)}
        persona = cls.model_validate(values, context={_AUTHORED: persona_id})
        check_bounds(persona, limits)
        return persona

    def domain_slug(self, domain: str) -> str:
        """The slug of a domain name, as used in skill ids ``f"{id}-{slug}"``."""
        return slugify(domain)

    def content_hash(self) -> str:
        """16 hex digits of the SHA-256 of the canonical JSON of every field but ``version``."""
        # pydantic's JSON serializer writes what json.dumps(..., ensure_ascii=False,
        # separators=(",", ":")) of model_dump(mode="json") would, at a fraction of the cost.
        canonical = self.__pydantic_serializer__.to_json(
            self, exclude={"version"}, exclude_defaults=True
        )
        return hashlib.sha256(canonical).hexdigest()[:16]

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with ``update``, validated again (so its version is recomputed).

        Raises:
            pydantic.ValidationError: ``update`` makes the persona invalid.
        """
        if not update:
            return super().model_copy(deep=deep)
        values = {name: getattr(self, name) for name in type(self).model_fields}
        values.update(update)
        values.pop("version", None)
        return self.model_validate(values)

    def __hash__(self) -> int:
        # Equal personas have equal content, hence the same id and version.
        return hash((self.id, self.version))

    @field_validator("id", mode="before")
    @classmethod
    def _id_matches_authored_id(cls, value: Any, info: ValidationInfo) -> Any:
        context = info.context
        if isinstance(context, dict) and _AUTHORED in context and value != context[_AUTHORED]:
            raise PydanticCustomError(
                "persona_id_mismatch",
                "'{given}' does not match the persona id '{expected}'; the id comes from "
                "the file name and may be left out",
                {"given": str(value), "expected": str(context[_AUTHORED])},
            )
        return value

    @field_validator("id")
    @classmethod
    def _id_is_slug(cls, value: str) -> str:
        return checked_persona_id(value)

    @field_validator("version")
    @classmethod
    def _version_not_authored(cls, value: str, info: ValidationInfo) -> str:
        if isinstance(info.context, dict) and _AUTHORED in info.context:
            raise PydanticCustomError(
                "version_not_allowed", "must not be given: it is computed from the content"
            )
        return value

    @field_validator("panel")
    @classmethod
    def _panel_is_not_its_own_member(
        cls, value: PanelSettings | None, info: ValidationInfo
    ) -> PanelSettings | None:
        persona_id = info.data.get("id")
        if value is not None and persona_id in (*value.members, value.moderator):
            raise PydanticCustomError(
                "panel_itself",
                "a panel cannot sit on itself: '{id}' is its own member or moderator",
                {"id": persona_id},
            )
        return value

    @field_validator("memory")
    @classmethod
    def _memory_not_shared_with_itself(
        cls, value: MemorySettings, info: ValidationInfo
    ) -> MemorySettings:
        persona_id = info.data.get("id")
        if persona_id in value.shared_with:
            raise PydanticCustomError(
                "memory_itself",
                "shared_with: '{id}' is this persona: name the others it shares memory with",
                {"id": persona_id},
            )
        if len(set(value.shared_with)) != len(value.shared_with):
            raise PydanticCustomError(
                "memory_shared_twice", "shared_with: a persona is listed twice"
            )
        return value

    @field_validator("knowledge_domains")
    @classmethod
    def _domains_have_distinct_slugs(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        seen: dict[str, str] = {}
        for domain in value:
            slug = slugify(domain)
            if not slug:
                raise PydanticCustomError(
                    "domain_slug_empty",
                    "domain '{domain}' needs at least one letter a-z or digit for its skill id",
                    {"domain": domain},
                )
            if slug == CONVERSATION_SKILL:
                raise PydanticCustomError(
                    "domain_slug_reserved",
                    "domain '{domain}' would have the skill id slug '{slug}', which is "
                    "reserved for the conversation skill",
                    {"domain": domain, "slug": slug},
                )
            if slug in seen:
                raise PydanticCustomError(
                    "domain_slug_collision",
                    "domains '{first}' and '{second}' have the same skill id slug '{slug}'",
                    {"first": seen[slug], "second": domain, "slug": slug},
                )
            seen[slug] = domain
        return value

    @model_validator(mode="after")
    def _card_skill_ids_are_unique(self) -> Self:
        if not self.card.skills:
            return self
        taken = {f"{self.id}-{CONVERSATION_SKILL}"} | {
            f"{self.id}-{slugify(domain)}" for domain in self.knowledge_domains
        }
        for index, skill in enumerate(self.card.skills):
            if skill.id in taken:
                raise PydanticCustomError(
                    "card_skill_id_taken",
                    "card.skills[{index}].id: '{skill_id}' is already the id of another skill",
                    {"index": index, "skill_id": skill.id},
                )
            taken.add(skill.id)
        return self

    @model_validator(mode="after")
    def _set_version(self) -> Self:
        # The model is frozen; validation is the one moment its version may be set.
        self.__dict__["version"] = self.content_hash()
        return self


def _loc_to_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int) or part == "[key]":
            path += f"[{part}]" if isinstance(part, int) else part
        else:
            path += f".{part}" if path else part
    return path


MAX_PROBLEMS = 20
"""Problems listed for one file at most; the rest are counted (a 1 MiB file of unknown
fields would otherwise give an error message many times its size)."""


def validation_problems(
    error: ValidationError, fields: Mapping[str, str] | None = None
) -> list[str]:
    """One ``"field.path: reason"`` string per problem, e.g.
    ``"interaction_samples[1].assistant: Field required"``; at most :data:`MAX_PROBLEMS`,
    then how many more there are. ``fields`` renames top-level fields in paths (a card's
    problems are named by the card's fields)."""
    details = error.errors(include_url=False, include_input=False, include_context=False)
    problems = []
    for detail in details[:MAX_PROBLEMS]:
        reason = detail["msg"]
        if detail["type"] == "extra_forbidden":
            reason = "unknown field"
        loc = detail["loc"]
        if fields and loc and isinstance(loc[0], str) and loc[0] in fields:
            loc = (fields[loc[0]], *loc[1:])
        path = _loc_to_path(loc)
        problems.append(f"{path}: {reason}" if path else reason)
    if len(details) > MAX_PROBLEMS:
        problems.append(f"and {len(details) - MAX_PROBLEMS} more problems")
    return problems
