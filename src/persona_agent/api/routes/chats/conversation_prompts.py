"""``/api/v1/conversations/{persona}/{context}/messages/{id}/prompt``: what reached the model
for an answer, by section (docs/prompt.md), and ``.../prompt`` for the newest answer's.

Whose conversation: the caller's, as the other conversation routes find it
(:mod:`persona_agent.api.routes.chats.conversations`); another caller's is answered 404, as one
that does not exist, and so is an answer without a record (kept for the last
``PERSONA_AGENT_PROMPT_RECORDS_KEPT`` answers of a conversation).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Request, status
from pydantic import BaseModel, ConfigDict, Field

from persona_agent.api.deps import MemoryReader, hub_parts
from persona_agent.api.routes.chats.conversations import Owner
from persona_agent.api.routes.error_body import ErrorDetail
from persona_agent.conversations.keys import history_key

__all__ = ["PromptOut", "router"]

router = APIRouter(
    prefix="/conversations",
    tags=["conversations"],
    responses={
        code: {"model": ErrorDetail, "description": reason}
        for code, reason in {
            401: "No API key, or a wrong one",
            403: "The principal may not read conversations (memory:read)",
            404: "No such conversation of this caller, answer, or record of its prompt",
            422: "A parameter is not valid",
        }.items()
    },
    dependencies=[MemoryReader],
)

PersonaId = Annotated[str, Path(min_length=1, max_length=63)]
ContextId = Annotated[str, Path(min_length=1, max_length=200)]
MessageId = Annotated[int, Path(ge=1, le=2**62, description="the answer's message id")]


class PromptItem(BaseModel):
    """One part of a section: a card field, a lore entry, a message..."""

    model_config = ConfigDict(extra="allow")
    label: str
    text: str = ""
    tokens: int = 0
    clipped: int = Field(0, description="characters left out of this record (not of the prompt)")


class PromptSection(BaseModel):
    name: str = Field(description="system, card, examples, lore, summary, memory, knowledge, ...")
    title: str
    tokens: int = Field(description="estimated: characters / 4")
    items: list[PromptItem]
    cut: list[dict[str, Any]] = Field(description="what was left out to fit, and why")


class PromptOut(BaseModel):
    """An answer's prompt as it was sent, by section."""

    messageId: int
    persona: str
    model: str
    mode: str
    tokens: int
    tokensEstimated: str
    messages: int
    modelCalls: int
    promptTokens: int = Field(description="what the model said it read, over every call")
    sections: list[PromptSection]


def _found(record: dict[str, Any] | None, message_id: int) -> PromptOut:
    if record is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            "No prompt record for this answer (another caller's conversation, no such "
            "answer, or one older than the records kept)",
        )
    return PromptOut.model_validate({**record, "messageId": message_id})


@router.get("/{persona_id}/{context_id}/messages/{message_id}/prompt", response_model=PromptOut)
async def read_prompt(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    message_id: MessageId,
    owner: Owner,
) -> PromptOut:
    """What reached the model for the answer ``message_id``, by section, with each
    section's tokens and what was cut to fit."""
    prompts = hub_parts(request).engine.prompts
    key = history_key(persona_id, owner, context_id)
    return _found(await prompts.get(key, message_id), message_id)


@router.get("/{persona_id}/{context_id}/prompt", response_model=PromptOut)
async def read_last_prompt(
    request: Request, persona_id: PersonaId, context_id: ContextId, owner: Owner
) -> PromptOut:
    """What reached the model for the conversation's newest answer, by section."""
    prompts = hub_parts(request).engine.prompts
    latest = await prompts.latest(history_key(persona_id, owner, context_id))
    return _found(latest[1] if latest else None, latest[0] if latest else 0)
