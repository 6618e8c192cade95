"""``/api/v1/conversations``: the stored conversations a caller steers (docs/conversations.md):
list, read with the alternatives of each answer, start with a chosen greeting, edit and
delete messages, choose an alternative, regenerate or continue the last answer, fork.

The caller is the API principal, as for memory (``memory:read`` to read, ``memory:write`` to
change; a principal with ``memory:admin`` names another with ``caller=``); on a hub without
keys an anonymous caller reaches anonymous conversations (anyone who knows a context id
continues it, as over A2A), and they are never listed: the context id is the only proof
of ownership an anonymous caller has (A2A's ``ListTasks`` wants it too). Another caller's
conversation is answered 404, as one that does not exist; a failed operation changes
nothing. Each write counts against the caller's requests a minute, and the persona's, as
an A2A call does (:func:`count_write`), and what it adds against the caller's storage
quota (409 naming the limit). Regenerate and continue run the persona: a call on it, as
over A2A, and an A2A task of the caller's (:mod:`.conversation_turns`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response, status

from persona_agent.api.deps import (
    CallerQuery,
    Conversations,
    MemoryReader,
    MemoryWriter,
    Store,
    TurnStarter,
    UserPersonaStore,
    hub_parts,
    owner_of,
)
from persona_agent.api.routes.chats.conversation_bodies import (
    Answer,
    Conversation,
    ConversationItem,
    ConversationList,
    EditBody,
    ForkBody,
    SelectBody,
    StartBody,
    UserOut,
    conversation_of,
)
from persona_agent.api.routes.chats.conversation_turns import (
    EVENT_STREAM,
    ConversationTurns,
    TurnMode,
    wants_events,
)
from persona_agent.api.routes.error_body import ErrorDetail
from persona_agent.chat.turn_modes import greetings_of
from persona_agent.conversations.conversation_store import ConversationStore
from persona_agent.conversations.keys import conversation_key, history_key
from persona_agent.errors import ConversationNotFound
from persona_agent.media.images import IMAGE_TYPES
from persona_agent.security.authorization import Action
from persona_agent.security.quotas import RateLimited

__all__ = ["Conversation", "Owner", "WritingOwner", "conversation_of", "count_write", "router"]

router = APIRouter(tags=["conversations"])

_BASE = "/conversations/{persona_id}/{context_id}"
PersonaId = Annotated[str, Path(min_length=1, max_length=63)]
ContextId = Annotated[str, Path(min_length=1, max_length=200)]
MessageId = Annotated[int, Path(ge=1, le=2**62, description="the message's id")]


_reading_owner = owner_of(Action.MEMORY_READ, anonymous=True)
_writing_owner = owner_of(Action.MEMORY_WRITE, anonymous=True)
Owner = Annotated[str, Depends(_reading_owner)]
"""Whose conversations a read is about ("": anonymous ones), the persona known."""
WritingOwner = Annotated[str, Depends(_writing_owner)]
"""Whose conversation a change is about, the persona known."""


_REASONS = {
    400: "The body cannot be parsed",
    401: "No API key, or a wrong one",
    403: "The principal may not read (memory:read) or change (memory:write) conversations; "
    "an anonymous caller's conversations are not listed; "
    "regenerate and continue: it may not call the persona (a2a, the key's personas)",
    404: "No such persona, conversation (of this caller), message or alternative",
    409: "The conversation does not allow it now (nothing to regenerate or continue; the "
    "context id is taken; the turn's task was canceled), or the caller keeps as much as "
    "its storage quota allows",
    415: "A hub without keys: the body must be labelled Content-Type: application/json",
    422: "A parameter or the body is not valid (a tool message's text cannot be edited)",
    429: "Over the caller's or the persona's limits (requests a minute, running tasks)",
    502: "The language model failed (the turn's task failed, with its message): nothing was "
    "changed",
}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers of a route: 401 and 403 always; a write's body 400 and 415 too,
    and its limits 429."""
    if 415 in codes or 502 in codes or 409 in codes:
        codes = (*codes, 400, 415)
    if 415 in codes and 429 not in codes:
        codes = (*codes, 429)
    return {
        code: {"model": ErrorDetail, "description": _REASONS[code]} for code in (401, 403, *codes)
    }


async def _read(
    request: Request, store: ConversationStore, persona_id: str, owner: str, context_id: str
) -> Conversation:
    key = history_key(persona_id, owner, context_id)
    view = await store.read(key)
    if view is None:
        raise ConversationNotFound()
    parts = hub_parts(request)
    conversation = conversation_of(parts.registry.persona(persona_id), context_id, view)
    user = await parts.user_personas.get_conversation(key)
    if user is not None:
        conversation.user = UserOut(name=user.name, description=user.description)
    return conversation


def count_write(request: Request, persona_id: str) -> None:
    """Count a write on a conversation against the caller's requests a minute
    (``PERSONA_AGENT_RATE_LIMIT``) and the persona's (``limits.requests_per_minute``), the
    same buckets as its A2A calls (the caller: the request's principal, else its address).

    Raises:
        HTTPException: 429 with ``Retry-After``, over a limit.
    """
    parts = hub_parts(request)
    quotas = parts.registry.services.quotas
    principal = getattr(request.state, "principal", None)
    address = request.client.host if request.client else "unknown"
    caller = principal.name if principal is not None else f"ip:{address}"
    persona = parts.registry.persona(persona_id)
    try:
        quotas.check_rate(caller, quotas.limits.requests_per_minute)
        if persona is not None:
            quotas.check_rate(caller, persona.limits.requests_per_minute or 0, scope=persona_id)
    except RateLimited as error:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            error.message,
            headers={"Retry-After": str(error.retry_after)},
        ) from None


async def _existing(store: ConversationStore, key: str) -> None:
    if await store.read(key) is None:
        raise ConversationNotFound()


@router.get(
    "/conversations",
    dependencies=[MemoryReader],
    response_model=ConversationList,
    responses=_responses(404, 422),
)
async def list_conversations(
    request: Request,
    store: Store,
    conversations: Conversations,
    persona_id: Annotated[str, Query(min_length=1, max_length=63)],
    caller: CallerQuery = None,
) -> ConversationList:
    """The caller's conversations with the persona, the latest changed first. An anonymous
    caller's are not listed (403): open one by its context id."""
    if getattr(request.state, "principal", None) is None:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "Conversations are listed for an identified caller only: an anonymous caller's "
            "context id is the only proof that a conversation is its own. Open one by its "
            "context id (GET /api/v1/conversations/{persona_id}/{context_id}), or call with "
            "an API key (PERSONA_AGENT_API_KEYS) to list your own",
        )
    owner = await _reading_owner(request, persona_id, store, caller)
    infos = await conversations.list(persona_id, conversation_key(owner, "") if owner else "")
    return ConversationList(
        items=[
            ConversationItem(
                persona_id=info.persona_id,
                context_id=info.context_id,
                messages=info.messages,
                updated_at=datetime.fromtimestamp(info.updated_ms / 1000, UTC)
                if info.updated_ms is not None
                else None,
                preview=info.preview,
            )
            for info in infos
        ]
    )


@router.post(
    "/conversations",
    dependencies=[MemoryWriter],
    status_code=status.HTTP_201_CREATED,
    response_model=Conversation,
    responses=_responses(404, 409, 415, 422),
)
async def start_conversation(
    request: Request,
    body: StartBody,
    store: Store,
    conversations: Conversations,
    caller: CallerQuery = None,
) -> Conversation:
    """A new conversation opening with the persona's greeting ``greeting`` (its other
    greetings kept as that answer's alternatives); a new context id unless one is given."""
    owner = await _writing_owner(request, body.persona_id, store, caller)
    count_write(request, body.persona_id)
    persona = hub_parts(request).registry.persona(body.persona_id)
    context_id = body.context_id or str(uuid.uuid4())
    key = history_key(body.persona_id, owner, context_id)
    given = body.user.persona() if body.user is not None else None
    users = hub_parts(request).user_personas
    # {{user}} in the greetings: the given user, else whom the conversation would have.
    name = given.name if given is not None else (await users.resolve(owner, key, None)).name
    greetings = greetings_of(persona, name) if persona is not None else []
    if body.greeting and body.greeting >= len(greetings):
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"The persona has no greeting {body.greeting} (it has {len(greetings)}: 0 is its "
            "first message, 1 and on its alternate greetings)",
        )
    text = greetings[body.greeting] if greetings else ""
    await conversations.start(key, text, greetings, body.greeting)
    if given is not None:
        await users.put_conversation(key, given)
    return await _read(request, conversations, body.persona_id, owner, context_id)


@router.get(
    _BASE, dependencies=[MemoryReader], response_model=Conversation, responses=_responses(404, 422)
)
async def read_conversation(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    owner: Owner,
    conversations: Conversations,
) -> Conversation:
    """The conversation: its selected branch, each answer's alternatives on its first message."""
    return await _read(request, conversations, persona_id, owner, context_id)


@router.get(
    _BASE + "/media/{sha256}",
    dependencies=[MemoryReader],
    response_class=Response,
    responses={
        200: {"content": {t: {} for t in IMAGE_TYPES}, "description": "The image's bytes"},
        **_responses(404, 422),
    },
)
async def read_media(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    sha256: Annotated[str, Path(pattern="^[0-9a-f]{64}$", description="the image's hash")],
    owner: Owner,
) -> Response:
    """An image of the conversation (as stored: scaled down, without its metadata)."""
    store = hub_parts(request).engine.images.store
    key = history_key(persona_id, owner, context_id)
    found = await store.load(key, [sha256]) if store is not None else {}
    image = found.get(sha256)
    if image is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "No such image in this conversation")
    headers = {"Cache-Control": "private, max-age=31536000, immutable", "ETag": f'"{sha256}"'}
    if request.headers.get("if-none-match") == f'"{sha256}"':
        return Response(status_code=304, headers=headers)
    return Response(image.data, media_type=image.media_type, headers=headers)


@router.delete(
    _BASE, dependencies=[MemoryWriter], status_code=204, responses=_responses(404, 422, 429)
)
async def delete_conversation(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    owner: WritingOwner,
    conversations: Conversations,
    users: UserPersonaStore,
) -> Response:
    """Delete the conversation, with its alternatives and its user persona."""
    count_write(request, persona_id)
    key = history_key(persona_id, owner, context_id)
    await conversations.delete_conversation(key)
    await users.delete_conversation(key)
    return Response(status_code=204)


@router.patch(
    f"{_BASE}/messages/{{message_id}}",
    dependencies=[MemoryWriter],
    response_model=Conversation,
    responses=_responses(404, 409, 415, 422),
)
async def edit_message(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    message_id: MessageId,
    body: EditBody,
    owner: WritingOwner,
    conversations: Conversations,
) -> Conversation:
    """Change the text of a message of the user's or the persona's."""
    count_write(request, persona_id)
    key = history_key(persona_id, owner, context_id)
    await _existing(conversations, key)
    await conversations.edit(key, message_id, body.content)
    return await _read(request, conversations, persona_id, owner, context_id)


@router.delete(
    f"{_BASE}/messages/{{message_id}}",
    dependencies=[MemoryWriter],
    response_model=Conversation,
    responses=_responses(404, 422, 429),
)
async def delete_message(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    message_id: MessageId,
    owner: WritingOwner,
    conversations: Conversations,
    following: bool = False,
) -> Conversation:
    """Delete a message (a tool call with its results), or it and all after it (``following``)."""
    count_write(request, persona_id)
    key = history_key(persona_id, owner, context_id)
    await _existing(conversations, key)
    await conversations.delete(key, message_id, following)
    return await _read(request, conversations, persona_id, owner, context_id)


@router.put(
    f"{_BASE}/swipes/{{anchor}}",
    dependencies=[MemoryWriter],
    response_model=Conversation,
    responses=_responses(404, 415, 422),
)
async def select_alternative(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    anchor: Annotated[
        int, Path(ge=0, le=2**62, description="the user message answered (0: the greeting)")
    ],
    body: SelectBody,
    owner: WritingOwner,
    conversations: Conversations,
) -> Conversation:
    """Make alternative ``selected`` the answer (the messages after it keep their place,
    with new ids)."""
    count_write(request, persona_id)
    key = history_key(persona_id, owner, context_id)
    await _existing(conversations, key)
    await conversations.select(key, anchor, body.selected)
    return await _read(request, conversations, persona_id, owner, context_id)


@router.post(
    f"{_BASE}/fork",
    dependencies=[MemoryWriter],
    status_code=status.HTTP_201_CREATED,
    response_model=Conversation,
    responses=_responses(404, 409, 415, 422),
)
async def fork_conversation(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    body: ForkBody,
    owner: WritingOwner,
    conversations: Conversations,
) -> Conversation:
    """A new conversation of the messages up to and including ``message_id``, with their
    alternatives; a new context id unless one is given."""
    count_write(request, persona_id)
    key = history_key(persona_id, owner, context_id)
    await _existing(conversations, key)
    new_context = body.context_id or str(uuid.uuid4())
    new_key = history_key(persona_id, owner, new_context)
    await conversations.fork(key, body.message_id, new_key)
    users = hub_parts(request).user_personas
    user = await users.get_conversation(key)
    if user is not None:  # the fork is the same user's
        await users.put_conversation(new_key, user)
    return await _read(request, conversations, persona_id, owner, new_context)


_TURN = {
    200: {
        "content": {EVENT_STREAM: {}},
        "description": "The answer; with Accept: text/event-stream, server-sent events: "
        "task, text (each piece), then answer or error (docs/conversations.md)",
    },
    **_responses(404, 409, 422, 429, 502),
}


@router.post(
    f"{_BASE}/regenerate", dependencies=[TurnStarter], response_model=Answer, responses=_TURN
)
async def regenerate(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    conversations: Conversations,
) -> Answer | Response:
    """Answer the last user message again: the answer it had is kept as an alternative, the
    new one selected (the model sees the selected branch up to that message). A call on the
    persona, as over A2A: an A2A task of the caller's, whose id the answer gives."""
    return await _run(request, conversations, persona_id, context_id, "regenerate")


@router.post(
    f"{_BASE}/continue", dependencies=[TurnStarter], response_model=Answer, responses=_TURN
)
async def continue_answer(
    request: Request,
    persona_id: PersonaId,
    context_id: ContextId,
    conversations: Conversations,
) -> Answer | Response:
    """Continue the last answer: the text the model adds is appended to it. A call on the
    persona, as :func:`regenerate`."""
    return await _run(request, conversations, persona_id, context_id, "continue")


async def _run(
    request: Request,
    conversations: ConversationStore,
    persona_id: str,
    context_id: str,
    mode: TurnMode,
) -> Answer | Response:
    """The turn, as a task of the persona (:mod:`.conversation_turns`): its answer, or
    its events when the client asks for ``text/event-stream``."""
    if "caller" in request.query_params:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"{mode} runs the persona for the caller itself, as a call over A2A does: it "
            "takes no caller= (whose conversation is the credential's)",
        )
    turns = ConversationTurns(hub_parts(request).registry)

    async def read(owner: str) -> Conversation:
        return await _read(request, conversations, persona_id, owner, context_id)

    if wants_events(request):
        return await turns.event_stream(request, conversations, persona_id, context_id, mode, read)
    return await turns.answer(request, conversations, persona_id, context_id, mode, read)
