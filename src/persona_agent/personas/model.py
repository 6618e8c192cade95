"""The persona model: what a persona file may say, validated.

One model reads both shapes people write persona files in: this hub's own and the
original persona-agent format (``personal_background`` as a mapping, any further keys
under ``language_style``, ``{type, content}`` interaction samples). It also has a place
for what character cards carry (personality, scenario, greetings, a lorebook, an
avatar); what has no place goes under ``extensions``, the one mapping whose keys are
free. Any other unknown key is an error that names it.

A persona's id is its file stem, a slug, so no id can name a path outside the
persona directory. Its ``version`` is a hash of its content, computed on
validation, so any change of content gives a new version (used as an ETag).
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from persona_agent.personas.bounds import check_bounds
from persona_agent.personas.formats.lorebook import Lorebook
from persona_agent.security.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "AVATAR_PATTERN",
    "CONVERSATION_SKILL",
    "MAX_PROBLEMS",
    "PERSONA_ID_PATTERN",
    "CardSettings",
    "CardSkill",
    "InteractionSample",
    "LanguageStyle",
    "ModelSettings",
    "PanelSettings",
    "Persona",
    "PersonaLimits",
    "ToolSettings",
    "is_valid_persona_id",
    "slugify",
    "validation_problems",
]

PERSONA_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
"""A persona id: lowercase letters, digits and hyphens, at most 63 characters."""

CONVERSATION_SKILL = "conversation"
"""The slug of the agent card's conversation skill; no knowledge domain may use it."""

AVATAR_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.(?i:png|jpe?g|webp|gif)$"
"""An avatar: the name of an image file beside the persona file (no directory part)."""

_ID_RE = re.compile(PERSONA_ID_PATTERN)
_AVATAR_RE = re.compile(AVATAR_PATTERN)
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


def _topics_as_list(value: Any) -> Any:
    """A domain given one topic as text (``politics: American politics``) has that topic."""
    return [value] if isinstance(value, str) else value


def _plain(value: Any) -> Any:
    """``value`` as JSON would hold it: YAML dates become ISO text, keys become text."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def _text_or_texts(value: Any) -> Any:
    """For keys that take text or a list of text (``language_style``'s further keys)."""
    if isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    ):
        return value
    raise PydanticCustomError("text_or_list", "must be text or a list of text")


def _background(value: Any) -> Any:
    if isinstance(value, str):
        return _require_text(value)
    if isinstance(value, dict):
        if not value:
            raise PydanticCustomError("empty_background", "must not be empty")
        return _plain(value)
    raise PydanticCustomError(
        "background_type", "must be text, or a mapping of headings to text, lists or mappings"
    )


def _sample_detail(value: Any) -> Any:
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return value
    raise PydanticCustomError("sample_detail", "must be text or a number")


def _texts_ok(value: str | list[str]) -> str | list[str]:
    for item in [value] if isinstance(value, str) else value:
        _require_text(item)
    return value


Text = Annotated[str, AfterValidator(_require_text)]
"""A string with at least one non-whitespace character."""

Topics = Annotated[list[Text], BeforeValidator(_topics_as_list), AfterValidator(_require_topics)]

TextOrTexts = Annotated[str | list[str], BeforeValidator(_text_or_texts), AfterValidator(_texts_ok)]

Background = Annotated[str | dict[str, Any], BeforeValidator(_background)]
"""Text, or (the original persona-agent format) a mapping of any keys, values nested."""


def _canonical(value: Any) -> Any:
    """``value`` as JSON would hold it, mappings in key order at every depth: the order of
    free keys means nothing, so it must not change a persona's version."""
    if isinstance(value, dict):
        return {str(key): _canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    return _plain(value)


FreeKeys = Annotated[dict[str, Any], AfterValidator(_canonical)]
"""A mapping of anything JSON can hold, in key order."""


def _avatar_name(value: str) -> str:
    if not _AVATAR_RE.fullmatch(value):
        raise PydanticCustomError(
            "avatar_name",
            "'{value}' is not an image file beside the persona file (a name such as "
            "ada.png: letters, digits, '.', '_' or '-', ending .png, .jpg, .jpeg, .webp or .gif)",
            {"value": value},
        )
    return value


AvatarName = Annotated[str, AfterValidator(_avatar_name)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LanguageStyle(BaseModel):
    """How the persona speaks: ``tone``, and any further keys (the original format's
    ``vocabulary``, ``speaking_style``, ``common_phrases``, ...) as text or lists of text."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, TextOrTexts] = Field(init=False)

    tone: Text
    characteristics: list[Text] = Field(default_factory=list)
    sample_phrases: list[Text] = Field(default_factory=list)

    def further(self) -> dict[str, str | list[str]]:
        """The keys beyond ``tone``, ``characteristics`` and ``sample_phrases``, in file order."""
        return dict(self.__pydantic_extra__ or {})


class InteractionSample(BaseModel):
    """One example of the persona's voice, in either shape:

    - ``{user, assistant}``: one exchange;
    - ``{type, content}`` (the original format): ``type`` is free (``quote``,
      ``conversation`` with ``Q:``/``A:`` lines, ``social_media``, ``speech``, ...) and
      may be left out; further keys (``platform``, ``date``, ...) describe the sample.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, Annotated[str | int | float, BeforeValidator(_sample_detail)]] = (
        Field(init=False)
    )

    user: Text | None = None
    assistant: Text | None = None
    type: Text | None = None
    content: Text | None = None

    def details(self) -> dict[str, str | int | float]:
        """The further keys of a ``{type, content}`` sample, in file order."""
        return dict(self.__pydantic_extra__ or {})

    @model_validator(mode="after")
    def _one_shape(self) -> Self:
        exchange = self.user is not None or self.assistant is not None
        if exchange and (self.content is not None or self.type is not None or self.details()):
            raise PydanticCustomError(
                "sample_shape",
                "give either user and assistant, or content (with an optional type), not both",
            )
        if exchange and (self.user is None or self.assistant is None):
            missing = "user" if self.user is None else "assistant"
            raise PydanticCustomError(
                "sample_shape",
                "{missing}: Field required (an exchange needs user and assistant)",
                {"missing": missing},
            )
        if not exchange and self.content is None:
            raise PydanticCustomError(
                "sample_shape", "needs user and assistant, or content (with an optional type)"
            )
        return self


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


class PersonaLimits(_Section):
    """Limits of this persona on top of the hub's (docs/security.md)."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    """Requests a minute one caller may make to this persona."""
    running_tasks: int | None = Field(default=None, ge=1)
    """Tasks this persona answers at once, all callers together."""
    model_calls_per_request: int | None = Field(default=None, ge=1)
    """Model calls one request to this persona may make, its consultations (or a panel's
    members) included; lowers the hub's ``PERSONA_AGENT_REQUEST_BUDGET_MODEL_CALLS``,
    never raises it. Consulted (or on a panel), the persona bounds its own part of the
    asking request's budget by it."""
    tool_calls_per_request: int | None = Field(default=None, ge=1)
    """Tool calls (MCP, outside agents, consultations) of one request, likewise."""


def _persona_id(value: str) -> str:
    if not is_valid_persona_id(value):
        raise PydanticCustomError(
            "persona_id",
            "'{value}' is not a valid persona id (expected {pattern})",
            {"value": value, "pattern": PERSONA_ID_PATTERN},
        )
    return value


PersonaId = Annotated[str, AfterValidator(_persona_id)]
"""The id of another persona of the hub."""

PanelMode = Literal["broadcast", "round-table", "moderated"]


class PanelSettings(_Section):
    """A panel: several personas answering one message together (docs/collaboration.md)."""

    mode: PanelMode = "broadcast"
    """``broadcast``: every member answers in parallel; ``round-table``: members speak in
    order, each seeing the previous answers, for ``rounds`` rounds; ``moderated``: the
    ``moderator`` picks who speaks next and writes the synthesis."""
    members: list[PersonaId] = Field(min_length=1, max_length=16)
    rounds: int = Field(default=1, ge=1, le=10)
    """Rounds of a round-table; turns of a moderated panel (at most ``rounds`` × members)."""
    moderator: PersonaId | None = None
    """The persona moderating a ``moderated`` panel (required there)."""

    @model_validator(mode="after")
    def _moderated_has_moderator(self) -> Self:
        if self.mode == "moderated" and self.moderator is None:
            raise PydanticCustomError("panel_moderator", "a moderated panel needs a moderator")
        if len(set(self.members)) != len(self.members):
            raise PydanticCustomError("panel_members", "a member is listed twice")
        return self


_NO_LIMITS = PersonaLimits()
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
    consult: list[PersonaId] | Literal["*"] = Field(default_factory=list)
    """Personas of the hub this one may consult (a tool each), or ``"*"``: every other."""
    agents: list[Text] = Field(default_factory=list)
    """Agents outside the hub this one may call (names from ``PERSONA_AGENT_AGENTS_FILE``)."""
    panel: PanelSettings | None = None
    """Makes this persona a panel of others (docs/collaboration.md)."""
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
