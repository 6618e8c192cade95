"""``/api/v1/user-persona`` and ``/api/v1/conversations/{persona_id}/{context_id}/user``:
who the user is (docs/conversations.md, "Who the user is").

A caller's saved user persona is its own (the principal's name: ``key:{name}``,
``oidc:{sub}``; a principal with ``memory:admin`` names another with ``caller=``); a hub
that identifies no callers has none (409), its callers give one per conversation. A
conversation's user persona belongs to the conversation, which is the caller's (an
anonymous caller's: anyone who knows its context id, as over A2A). Reading needs what
reading memories needs (``memory:read``), changing what changing them needs
(``memory:write``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response, status
from pydantic import BaseModel, Field, model_validator

from persona_agent.api.deps import (
    CallerQuery,
    MemoryReader,
    MemoryWriter,
    UserPersonaStore,
    audit_memory,
    owner_of,
    principal_named,
)
from persona_agent.api.routes.error_body import ErrorDetail, error_responses
from persona_agent.conversations.keys import history_key
from persona_agent.errors import InvalidUserPersonaError
from persona_agent.personas.user_identity import MAX_USER_DESCRIPTION_CHARS, UserPersona
from persona_agent.security.authorization import Action

__all__ = ["UserPersonaBody", "router"]

router = APIRouter(tags=["conversations"], responses=error_responses(401, 403))

_SAVED = "/user-persona"
_OF_CONVERSATION = "/conversations/{persona_id}/{context_id}/user"
_REASONS = {
    400: "A body that cannot be parsed",
    404: "No such persona, or no user persona saved (for the caller, or the conversation)",
    409: "A hub that identifies no callers: no caller has a saved user persona",
    415: "A hub without keys: the body must be labelled Content-Type: application/json",
    422: "A parameter or the body is not valid (an empty or long name, a long description)",
}
ContextId = Annotated[
    str, Path(min_length=1, max_length=200, description="the conversation's A2A contextId")
]


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorDetail, "description": _REASONS[code]} for code in codes}


class UserPersonaBody(BaseModel):
    """Who the user is: ``{{user}}`` in the persona's prompt, greeting and examples is
    the name; the description is a section of the system prompt."""

    name: str = Field(
        max_length=1000, description="the user's display name: 1 to 64 characters, one line"
    )
    description: str = Field(
        "",
        max_length=4 * MAX_USER_DESCRIPTION_CHARS,
        description=f"what the persona knows of the user: at most {MAX_USER_DESCRIPTION_CHARS:,} "
        "characters (spaces around both are dropped)",
    )

    @model_validator(mode="after")
    def _checked(self) -> UserPersonaBody:
        try:
            user = UserPersona.of(self.name, self.description)
        except InvalidUserPersonaError as error:
            raise ValueError(error.message) from None
        self.name, self.description = user.name, user.description
        return self

    def persona(self) -> UserPersona:
        return UserPersona(self.name, self.description)

    @classmethod
    def of(cls, user: UserPersona) -> UserPersonaBody:
        return cls(name=user.name, description=user.description)


def _saved_owner(request: Request, action: Action, caller: str | None) -> str:
    """Whose saved user persona: ``caller`` (a principal may name another with
    ``memory:admin``, else 403), or the principal's own; 409 on a hub that identifies no
    callers."""
    owner = principal_named(request, action, None, caller)
    if owner is None:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            "This hub identifies no callers (no API keys or OIDC issuer), and a saved user "
            "persona belongs to an identified caller: give it per conversation instead "
            "(PUT /api/v1/conversations/{persona_id}/{context_id}/user, or the A2A user "
            "extension urn:persona-agent:extension:user:v1)",
        )
    return owner


Owner = Annotated[str, Depends(owner_of(Action.MEMORY_READ, anonymous=True))]
"""Whose conversation a read is about ("": an anonymous caller's), the persona known."""
WritingOwner = Annotated[str, Depends(owner_of(Action.MEMORY_WRITE, anonymous=True))]


def _none_saved(what: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"No user persona is saved for {what}")


@router.get(
    _SAVED,
    dependencies=[MemoryReader],
    response_model=UserPersonaBody,
    responses=_responses(404, 409, 422),
)
async def get_saved(
    request: Request, users: UserPersonaStore, caller: CallerQuery = None
) -> UserPersonaBody:
    """The caller's saved user persona: who it is in every conversation that was not
    given one of its own (404 when none is saved)."""
    owner = _saved_owner(request, Action.MEMORY_READ, caller)
    user = await users.get_caller(owner)
    if user is None:
        raise _none_saved(f"caller {owner}: PUT one")
    return UserPersonaBody.of(user)


@router.put(
    _SAVED,
    dependencies=[MemoryWriter],
    response_model=UserPersonaBody,
    responses=_responses(400, 409, 415, 422),
)
async def put_saved(
    request: Request, body: UserPersonaBody, users: UserPersonaStore, caller: CallerQuery = None
) -> UserPersonaBody:
    """Save the caller's user persona: its next turns, in every conversation that has none
    of its own, use it."""
    owner = _saved_owner(request, Action.MEMORY_WRITE, caller)
    await users.put_caller(owner, body.persona())
    audit_memory(request, "user_persona.save", None, caller=owner)
    return body


@router.delete(
    _SAVED,
    dependencies=[MemoryWriter],
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_responses(404, 409, 422),
)
async def delete_saved(
    request: Request, users: UserPersonaStore, caller: CallerQuery = None
) -> Response:
    """Delete the caller's saved user persona (404 when none is saved)."""
    owner = _saved_owner(request, Action.MEMORY_WRITE, caller)
    if not await users.delete_caller(owner):
        raise _none_saved(f"caller {owner}")
    audit_memory(request, "user_persona.delete", None, caller=owner)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    _OF_CONVERSATION,
    dependencies=[MemoryReader],
    response_model=UserPersonaBody,
    responses=_responses(404, 422),
)
async def get_of_conversation(
    persona_id: str, context_id: ContextId, owner: Owner, users: UserPersonaStore
) -> UserPersonaBody:
    """The conversation's own user persona (404 when it was given none: its turns use the
    caller's saved one, or "User")."""
    key = history_key(persona_id, owner, context_id)
    user = await users.get_conversation(key)
    if user is None:
        raise _none_saved(f"conversation {context_id} with persona '{persona_id}'")
    return UserPersonaBody.of(user)


@router.put(
    _OF_CONVERSATION,
    dependencies=[MemoryWriter],
    response_model=UserPersonaBody,
    responses=_responses(400, 404, 415, 422),
)
async def put_of_conversation(
    request: Request,
    persona_id: str,
    context_id: ContextId,
    body: UserPersonaBody,
    owner: WritingOwner,
    users: UserPersonaStore,
) -> UserPersonaBody:
    """Who the user is in this conversation, from its next turn on (a conversation not
    started yet starts with it)."""
    key = history_key(persona_id, owner, context_id)
    await users.put_conversation(key, body.persona())
    audit_memory(request, "user_persona.save", persona_id, contextId=context_id)
    return body


@router.delete(
    _OF_CONVERSATION,
    dependencies=[MemoryWriter],
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_responses(404, 422),
)
async def delete_of_conversation(
    request: Request,
    persona_id: str,
    context_id: ContextId,
    owner: WritingOwner,
    users: UserPersonaStore,
) -> Response:
    """Forget the conversation's own user persona: its next turns use the caller's saved
    one, or "User" (404 when it had none)."""
    key = history_key(persona_id, owner, context_id)
    if not await users.delete_conversation(key):
        raise _none_saved(f"conversation {context_id} with persona '{persona_id}'")
    audit_memory(request, "user_persona.delete", persona_id, contextId=context_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
