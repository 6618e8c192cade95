"""The persona model's sections: language style, interaction samples, and the settings of
its model, tools, agent card, limits, panel and voice."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from persona_agent.personas.field_types import PersonaId, SampleDetail, Text, TextOrTexts

__all__ = [
    "CardSettings",
    "CardSkill",
    "InteractionSample",
    "LanguageStyle",
    "MemorySettings",
    "ModelSettings",
    "PanelMode",
    "PanelSettings",
    "PersonaLimits",
    "ToolSettings",
    "VoiceSettings",
]


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
    __pydantic_extra__: dict[str, SampleDetail] = Field(init=False)

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
    vision: bool | None = None
    """Whether the model sees images (docs/media.md); ``None``: as the hub's
    ``PERSONA_AGENT_VISION_MODELS`` say of its name."""


class ToolSettings(_Section):
    """Which MCP tools the persona may call."""

    allow: list[Text] | None = None
    """``None``: every configured tool; else entries ``server`` (all its tools) or
    ``server__tool``; ``[]``: no tools at all."""
    required: bool = False
    """The persona cannot work without tools."""


class MemorySettings(_Section):
    """What the persona remembers of its callers (docs/memory.md); ``None``: the hub's
    default. The hub's ``PERSONA_AGENT_MEMORY`` is the master switch: with it off, no
    persona remembers."""

    enabled: bool = True
    """``false``: this persona remembers nothing (nothing kept, nothing recalled, no tools)."""
    token_budget: int | None = Field(default=None, ge=0, le=100_000)
    """Tokens of remembered text a turn's prompt takes at most (the hub's
    ``PERSONA_AGENT_MEMORY_TOKEN_BUDGET``)."""
    max_items: int | None = Field(default=None, ge=1, le=100)
    """Remembered items a turn's prompt takes at most (``PERSONA_AGENT_MEMORY_MAX_ITEMS``)."""
    shared_with: list[PersonaId] = Field(default_factory=list, max_length=32)
    """Personas this one shares its memory of a caller with: a persona named here that
    names this one back reads what the caller told either of them (always of that caller
    alone)."""
    tools: bool = True
    """Offer the model ``remember``, ``recall`` and ``forget`` (when it can call tools)."""


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


class VoiceSettings(_Section):
    """The voice a persona's answers are spoken with, for clients that accept audio
    (docs/media.md#voice)."""

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    """A Piper voice of the hub (``en_US-joe-medium``, or a file ``NAME.onnx`` of its voices
    directory); ``None``: the hub's default voice (``PERSONA_AGENT_DEFAULT_VOICE``)."""
    speed: float = Field(default=1.0, ge=0.5, le=2.0)
    """How fast it speaks: 1.0 the voice's own pace, 0.5 half as fast, 2.0 twice as fast."""
