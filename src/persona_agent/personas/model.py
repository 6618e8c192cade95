"""The persona model: what a persona file may say, validated.

A persona's id is its file stem, a slug, so no id can name a path outside the
persona directory. Its ``version`` is a hash of its content, computed on
validation, so any change of content gives a new version (used as an ETag).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "CONVERSATION_SKILL",
    "PERSONA_ID_PATTERN",
    "CardSettings",
    "CardSkill",
    "InteractionSample",
    "LanguageStyle",
    "ModelSettings",
    "Persona",
    "ToolSettings",
    "is_valid_persona_id",
    "slugify",
]

PERSONA_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
"""A persona id: lowercase letters, digits and hyphens, at most 63 characters."""

CONVERSATION_SKILL = "conversation"
"""The slug of the agent card's conversation skill; no knowledge domain may use it."""

_ID_RE = re.compile(PERSONA_ID_PATTERN)
_NOT_SLUG_RE = re.compile(r"[^a-z0-9]+")
_AUTHORED = "persona_agent.authored_id"  # validation context key set by Persona.from_data


def is_valid_persona_id(value: str) -> bool:
    """Whether ``value`` is a persona id (``PERSONA_ID_PATTERN``, the whole string)."""
    return _ID_RE.fullmatch(value) is not None


def slugify(text: str) -> str:
    """Lowercase; every run of characters other than ``a-z0-9`` becomes one ``-``; trimmed."""
    return _NOT_SLUG_RE.sub("-", text.lower()).strip("-")


def _require_text(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("empty_text", "must not be empty")
    return value


def _require_topics(value: list[str]) -> list[str]:
    if not value:
        raise PydanticCustomError("no_topics", "at least one topic is required")
    return value


Text = Annotated[str, AfterValidator(_require_text)]
"""A string with at least one non-whitespace character."""

Topics = Annotated[list[Text], AfterValidator(_require_topics)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LanguageStyle(_Section):
    """How the persona speaks."""

    tone: Text
    characteristics: list[Text] = Field(default_factory=list)
    sample_phrases: list[Text] = Field(default_factory=list)


class InteractionSample(_Section):
    """One example exchange, shown to the model as an example of the persona's voice."""

    user: Text
    assistant: Text


class ModelSettings(_Section):
    """Per-persona LLM settings; ``None`` means the hub's default."""

    name: Text | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)


class ToolSettings(_Section):
    """Which MCP tools the persona may call."""

    allow: list[Text] | None = None
    """``None``: every configured tool; else entries ``server`` (all its tools) or
    ``server__tool``; ``[]``: no tools at all."""
    required: bool = False
    """The persona cannot work without tools."""


class CardSkill(_Section):
    """An extra skill for the persona's agent card."""

    id: Text
    name: Text
    description: Text
    tags: list[Text] = Field(default_factory=list)
    examples: list[Text] = Field(default_factory=list)


class CardSettings(_Section):
    """Extra content for the persona's agent card."""

    skills: list[CardSkill] = Field(default_factory=list)
    examples: list[Text] = Field(default_factory=list)
    """Example prompts for the conversation skill."""


_NO_MODEL_SETTINGS = ModelSettings()
_NO_TOOL_SETTINGS = ToolSettings()
_NO_CARD_SETTINGS = CardSettings()
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
    personal_background: Text
    language_style: LanguageStyle
    knowledge_domains: dict[Text, Topics]
    interaction_samples: list[InteractionSample] = Field(default_factory=list)
    model: ModelSettings = Field(default_factory=lambda: _NO_MODEL_SETTINGS)
    tools: ToolSettings = Field(default_factory=lambda: _NO_TOOL_SETTINGS)
    card: CardSettings = Field(default_factory=lambda: _NO_CARD_SETTINGS)
    version: str = ""

    @classmethod
    def from_data(cls, persona_id: str, data: Mapping[str, Any]) -> Self:
        """A persona from authored data (a parsed file or upload) and its id.

        ``data`` must not contain ``version``; it may contain ``id`` only if it
        equals ``persona_id``.

        Raises:
            pydantic.ValidationError: a field is missing or invalid, including a
                bad ``persona_id`` (reported on the field ``id``).
        """
        values = {**data, "id": data.get("id", persona_id)}
        return cls.model_validate(values, context={_AUTHORED: persona_id})

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
        if not is_valid_persona_id(value):
            raise PydanticCustomError(
                "persona_id",
                "'{value}' is not a valid persona id (expected {pattern})",
                {"value": value, "pattern": PERSONA_ID_PATTERN},
            )
        return value

    @field_validator("version")
    @classmethod
    def _version_not_authored(cls, value: str, info: ValidationInfo) -> str:
        if isinstance(info.context, dict) and _AUTHORED in info.context:
            raise PydanticCustomError(
                "version_not_allowed", "must not be given: it is computed from the content"
            )
        return value

    @field_validator("knowledge_domains")
    @classmethod
    def _domains_have_distinct_slugs(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        if not value:
            raise PydanticCustomError("no_domains", "at least one domain is required")
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
