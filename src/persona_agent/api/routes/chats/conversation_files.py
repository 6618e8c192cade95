"""``/api/v1/conversations/.../export`` and ``/api/v1/conversations/import``: a caller's
conversation with a persona as a file (SillyTavern's chat JSONL, the hub's JSON, a
Markdown transcript) and such a file as a new conversation that continues where it
stopped (docs/conversations.md, "Moving chats").

Whose conversation: the caller's, as the other conversation routes find it
(:mod:`persona_agent.api.routes.chats.conversations`: ``""``, anonymous, on a hub that identifies
nobody); another caller's is answered 404, as one that does not exist.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import (
    APIRouter,
    File,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
    UploadFile,
    status,
)
from fastapi.responses import JSONResponse

from persona_agent.api.deps import Conversations, MemoryReader, MemoryWriter, Store, hub_parts
from persona_agent.api.routes.chats.conversations import (
    Owner,
    WritingOwner,
    conversation_of,
    count_write,
)
from persona_agent.api.routes.error_body import ErrorDetail, error_responses
from persona_agent.conversations.keys import history_key
from persona_agent.errors import ConversationNotFound

if TYPE_CHECKING:
    from persona_agent.conversations.files.chat_file import ImportedChat

# The file formats (persona_agent.conversations.files: four modules, ~0.1 MiB) are
# imported by the first export or import, not with the routes (docs/performance.md).

__all__ = ["router"]

router = APIRouter(
    prefix="/conversations", tags=["conversations"], responses=error_responses(401, 403)
)

_MEDIA = {
    "sillytavern": ("application/jsonl", "jsonl"),
    "json": ("application/json", "json"),
    "markdown": ("text/markdown; charset=utf-8", "md"),
}
_REASONS = {
    404: "No such persona, or no such conversation of the caller's with it",
    409: "The context id names a conversation that exists already, or the chat would take the "
    "caller past its storage quota",
    413: "The file is larger than the limit",
    422: "The file cannot be read (the line or message and the field are named), or a "
    "parameter is not valid",
    429: "Over the caller's or the persona's requests a minute",
}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorDetail, "description": reason} for code, reason in _REASONS.items()
}


def _file_name(persona_id: str, context_id: str, extension: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{persona_id}-{context_id}")[:120]
    return f"{safe}.{extension}"


def read_chat(data: bytes, kind: Literal["sillytavern", "json"]) -> ImportedChat:
    """The chat of an uploaded file (422 for one that cannot be read: ChatFileError)."""
    from persona_agent.conversations.files.chat_file import MAX_FILE_BYTES, ChatFileError
    from persona_agent.conversations.files.json_chat import from_json
    from persona_agent.conversations.files.sillytavern import from_sillytavern

    if len(data) > MAX_FILE_BYTES:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"The chat file is larger than the limit of {MAX_FILE_BYTES:,} bytes",
        )
    try:
        return from_sillytavern(data) if kind == "sillytavern" else from_json(data)
    except ChatFileError as error:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, error.message) from None


def write_chat(
    chat: ImportedChat,
    kind: Literal["sillytavern", "json", "markdown"],
    *,
    persona_id: str,
    context_id: str,
    user_name: str,
    character_name: str,
) -> Response:
    """The file of a chat, to download."""
    from persona_agent.conversations.files.json_chat import to_json
    from persona_agent.conversations.files.markdown_chat import to_markdown
    from persona_agent.conversations.files.sillytavern import to_sillytavern

    chat = replace(chat, user_name=user_name, character_name=character_name)
    if kind == "sillytavern":
        data = to_sillytavern(chat, user_name=user_name, character_name=character_name)
    elif kind == "json":
        data = to_json(chat, persona_id=persona_id, context_id=context_id)
    else:
        title = f"{character_name} and {user_name}"
        data = to_markdown(chat, title=title).encode()
    media, extension = _MEDIA[kind]
    name = _file_name(persona_id, context_id, extension)
    return Response(
        data, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


async def user_name(request: Request, owner: str, key: str) -> str:
    """The user's name in the conversation: its user persona's (the conversation's, else
    the caller's saved one) where the hub keeps user personas, else ``User``."""
    # The user personas' store (docs/conversations.md, "Who the user is"), when the hub
    # has it: read through the parts, so these routes do not depend on its module.
    user_personas = getattr(hub_parts(request), "user_personas", None)
    if user_personas is None:
        return "User"
    return str((await user_personas.resolve(owner, key, None)).name)


ContextPath = Annotated[str, Path(min_length=1, max_length=200, description="the conversation")]
PersonaQuery = Annotated[str, Query(min_length=1, max_length=100, description="the persona")]


@router.get(
    "/{persona_id}/{context_id}/export",
    dependencies=[MemoryReader],
    responses={
        200: {
            "description": "The conversation as a file to download",
            "content": {"application/jsonl": {}, "application/json": {}, "text/markdown": {}},
        },
        **_RESPONSES,
    },
    response_class=Response,
)
async def export_conversation(
    request: Request,
    persona_id: str,
    context_id: ContextPath,
    owner: Owner,
    store: Store,
    conversations: Conversations,
    format: Annotated[
        Literal["sillytavern", "json", "markdown"],
        Query(description="sillytavern: SillyTavern's chat JSONL; json: the hub's; markdown"),
    ] = "sillytavern",
) -> Response:
    """The caller's conversation with the persona as a file: ``sillytavern`` (its user
    and persona messages, each answer's alternatives as swipes), ``json`` (everything,
    tool calls included; ``POST /conversations/import?format=json`` reads it back) or
    ``markdown`` (a transcript to read)."""
    from persona_agent.conversations.files.chat_file import chat_of_view

    persona = await store.get(persona_id)
    key = history_key(persona_id, owner, context_id)
    view = await conversations.read(key)
    if view is None:
        raise ConversationNotFound()
    chat = chat_of_view(view)
    return write_chat(
        chat,
        format,
        persona_id=persona_id,
        context_id=context_id,
        user_name=await user_name(request, owner, key),
        character_name=persona.name,
    )


@router.post(
    "/import",
    dependencies=[MemoryWriter],
    status_code=status.HTTP_201_CREATED,
    responses={**error_responses(400), **_RESPONSES},
)
async def import_conversation(
    request: Request,
    store: Store,
    conversations: Conversations,
    persona_id: PersonaQuery,
    owner: WritingOwner,
    file: Annotated[UploadFile, File(description="The chat file (multipart)")],
    format: Annotated[
        Literal["sillytavern", "json"],
        Query(description="sillytavern: SillyTavern's chat JSONL; json: the hub's export"),
    ] = "sillytavern",
    context_id: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="its context id (default: a new one)"),
    ] = None,
) -> JSONResponse:
    """A chat file as a new conversation of the caller's with the persona, which continues
    where the file stopped (over A2A with its ``context_id``). 422 names the line (or the
    message) and the field of a file that cannot be read, and nothing is stored; 409 when
    the caller has a conversation at ``context_id``, or when the chat would take it past its
    storage quota (the limit is named). The answer is the conversation, and
    ``notes``: what of the file was left out (system messages, swipes of no answer)."""
    from persona_agent.conversations.files.chat_file import MAX_FILE_BYTES, creation_of

    persona = await store.get(persona_id)
    count_write(request, persona_id)
    chat = read_chat(await file.read(MAX_FILE_BYTES + 1), format)
    context_id = context_id or str(uuid.uuid4())
    key = history_key(persona_id, owner, context_id)
    messages, swipes = creation_of(chat)
    await conversations.create(key, messages, swipes)
    view = await conversations.read(key)
    if view is None:  # deleted again at once
        raise ConversationNotFound()
    body = {
        **conversation_of(persona, context_id, view).model_dump(mode="json"),
        "notes": chat.notes,
    }
    location = f"/api/v1/conversations/{persona_id}/{context_id}"
    return JSONResponse(body, status_code=201, headers={"Location": location})
