"""The bodies of the conversation routes (:mod:`persona_agent.api.routes.chats.conversations`):
what a conversation looks like over REST, and what each operation takes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from persona_agent.api.routes.user_personas import UserPersonaBody
from persona_agent.chat.turn_modes import greetings_of
from persona_agent.conversations.view import ConversationView, message_parts
from persona_agent.personas.model import Persona

__all__ = [
    "Answer",
    "Conversation",
    "ConversationItem",
    "ConversationList",
    "EditBody",
    "ForkBody",
    "MessageOut",
    "SelectBody",
    "StartBody",
    "Swipes",
    "UserOut",
    "conversation_of",
]


class Swipes(BaseModel):
    """The alternatives of the answer this message opens."""

    anchor: int = Field(description="the id of the user message answered (0: the greeting)")
    selected: int = Field(description="the selected alternative's position (from 0)")
    count: int
    texts: list[str] = Field(description="each alternative's final text, by position")


class MessageOut(BaseModel):
    id: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    at: datetime | None = Field(description="when it was stored (none: before it was recorded)")
    swipes: Swipes | None = None
    parts: list[dict[str, Any]] = Field(
        default_factory=list,
        description="what the message was made of: text, images (with their media URL), "
        "documents (docs/media.md)",
    )


class UserOut(BaseModel):
    name: str
    description: str


class Conversation(BaseModel):
    """A conversation: its selected branch, with the alternatives of its answers."""

    persona_id: str
    context_id: str
    user: UserOut | None = None
    greetings: list[str] = Field(description="the persona's greetings (0: its first message)")
    messages: list[MessageOut]


class ConversationItem(BaseModel):
    persona_id: str
    context_id: str
    messages: int
    updated_at: datetime | None
    preview: str


class ConversationList(BaseModel):
    items: list[ConversationItem]


class Answer(BaseModel):
    answer: str = Field(description="the new answer (continue: the text added)")
    conversation: Conversation
    task_id: str = Field(
        "", description="the A2A task that answered (GetTask, on the persona's A2A endpoint)"
    )
    state: str = Field(
        "completed",
        description="how the task ended: completed, or input-required (the answer is a "
        "tool's question for the user)",
    )
    cost: dict[str, Any] | None = Field(
        None,
        description="the task's cost-v1 (usage, durationMs, costUsd where the rates are "
        "known), as its final A2A message has it (docs/a2a.md)",
    )


class StartBody(BaseModel):
    persona_id: str = Field(min_length=1, max_length=63)
    greeting: int = Field(0, ge=0, le=1000, description="0: the first message, k: alternate k")
    context_id: str | None = Field(None, min_length=1, max_length=200)
    user: UserPersonaBody | None = Field(
        None, description="who the user is in this conversation (docs/conversations-user.md)"
    )


class EditBody(BaseModel):
    content: str = Field(min_length=1, max_length=100_000)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, content: str) -> str:
        if not content.strip():
            raise ValueError("the text is blank: delete the message instead")
        return content


class SelectBody(BaseModel):
    selected: int = Field(ge=0, le=10_000)


class ForkBody(BaseModel):
    message_id: int = Field(ge=1, le=2**62)
    context_id: str | None = Field(None, min_length=1, max_length=200)


def conversation_of(
    persona: Persona | None, context_id: str, view: ConversationView
) -> Conversation:
    """The REST form of a stored conversation."""
    messages = []
    for row in view.messages:
        alternatives = view.alternatives_at(row.id)
        message = row.message
        content = message.get("content")
        messages.append(
            MessageOut(
                id=row.id,
                role=row.role,
                content=content if isinstance(content, str) else None,
                tool_calls=message.get("tool_calls"),
                tool_call_id=message.get("tool_call_id"),
                at=datetime.fromtimestamp(row.at_ms / 1000, UTC) if row.at_ms is not None else None,
                swipes=Swipes(
                    anchor=alternatives.anchor,
                    selected=alternatives.selected,
                    count=alternatives.count,
                    texts=list(alternatives.texts),
                )
                if alternatives is not None
                else None,
                parts=message_parts(message, view.key.partition(":")[0], context_id),
            )
        )
    return Conversation(
        persona_id=view.key.partition(":")[0],
        context_id=context_id,
        greetings=greetings_of(persona) if persona is not None else [],
        messages=messages,
    )
