"""``/api/v1/personas/{persona_id}/memories`` and ``/api/v1/memories``: the memory a caller
can manage (docs/memory.md, "Managing memory").

A caller manages its own memory (the principal's name: ``key:{name}``, ``oidc:{sub}``);
a principal with ``memory:admin`` names another with ``caller=``. Every query names the
owner, so another caller's memory is answered 404, as one that does not exist.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, field_validator

from persona_agent.api.deps import (
    CallerQuery,
    CallerStore,
    MemoryReader,
    MemoryReadOwner,
    MemoryWriteOwner,
    MemoryWriter,
    audit_memory,
    caller_owner,
)
from persona_agent.api.routes.error_body import ErrorDetail, error_responses
from persona_agent.memory.records import MAX_TEXT, MemoryOff, MemoryRecord, context_id_of
from persona_agent.security.authorization import Action
from persona_agent.security.principal import Principal

__all__ = ["router"]

router = APIRouter(tags=["memory"], responses=error_responses(401, 403))

_EXPORT_PAGE = 500
"""Records read per query while an export streams (the whole export is never in memory)."""

MemoryId = Annotated[int, Path(ge=1, le=2**62, description="the memory's id")]


class MemoryItem(BaseModel):
    """One remembered message."""

    id: int = Field(description="its id; an edit gives it a new one")
    persona: str
    role: str = Field(description="who said it: user (the caller) or assistant (the persona)")
    text: str
    contextId: str = Field(description="the conversation (A2A contextId) it was said in")
    rememberedAt: datetime = Field(description="when it was remembered or last edited")


class MemoryPage(BaseModel):
    """A page of a caller's memories with a persona, newest first."""

    persona: str
    caller: str
    items: list[MemoryItem]
    next: int | None = Field(
        description="pass as before= for the next (older) page; null: this is the last"
    )


class MemoryState(BaseModel):
    """Whether the hub remembers, and what it remembers of the caller asking."""

    on: bool = Field(description="memory is on (PERSONA_AGENT_MEMORY)")
    caller: str | None = Field(
        description="who the hub knows the caller as (key:{name}, oidc:{sub}); null: "
        "anonymous, remembered within one conversation only"
    )


class SearchResults(BaseModel):
    """The memories most relevant to a query, best first (as the prompt would choose)."""

    persona: str
    caller: str
    query: str
    items: list[MemoryItem]


class MemoryEdit(BaseModel):
    """A memory's new text."""

    text: str = Field(
        min_length=1,
        max_length=MAX_TEXT,
        description="the new text (leading and trailing spaces are dropped); not blank",
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("the text is blank: delete the memory instead")
        return text.strip()


class Forgotten(BaseModel):
    """What was deleted of a caller, with every persona (rows counted just before)."""

    caller: str
    memories: int
    conversations: int
    messages: int
    tasks: int
    documents: int
    """Knowledge documents the caller attached to its conversations (A2A file parts)."""
    userPersonas: int
    """The caller's saved user persona and its conversations' (who the user said they are)."""


def _item(owner: str, record: MemoryRecord) -> MemoryItem:
    return MemoryItem(
        id=record.seq,
        persona=record.persona_id,
        role=record.role,
        text=record.text,
        contextId=context_id_of(owner, record.conversation),
        rememberedAt=datetime.fromtimestamp(record.at_ms / 1000, UTC),
    )


def _off(error: MemoryOff) -> HTTPException:
    return HTTPException(status.HTTP_409_CONFLICT, str(error))


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    reasons = {
        400: "A hub without authentication, and no caller named (caller=); a body that "
        "cannot be parsed",
        404: "No such persona, or no such memory of the caller's with it",
        409: "Memory is off on this hub (PERSONA_AGENT_MEMORY=on): nothing to search or embed",
        415: "A hub without keys: the body must be labelled Content-Type: application/json",
        422: "A parameter or the body is not valid (an id, a page, a text)",
    }
    return {code: {"model": ErrorDetail, "description": reasons[code]} for code in codes}


_BASE = "/personas/{persona_id}/memories"


@router.get("/memory", dependencies=[MemoryReader], response_model=MemoryState)
async def memory_state(request: Request, callers: CallerStore) -> MemoryState:
    """Whether memory is on, and whom the hub takes the caller for: an anonymous caller's
    memory lasts one conversation (the console and the terminal chat say so)."""
    principal = getattr(request.state, "principal", None)
    name = principal.name if isinstance(principal, Principal) else None
    return MemoryState(on=callers.records.embedder is not None, caller=name)


@router.get(
    _BASE,
    dependencies=[MemoryReader],
    response_model=MemoryPage,
    responses=_responses(400, 404, 422),
)
async def list_memories(
    persona_id: str,
    owner: MemoryReadOwner,
    callers: CallerStore,
    before: Annotated[
        int | None,
        Query(ge=1, description="only memories older than this id (the previous page's next)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> MemoryPage:
    """The caller's memories with the persona, newest first, a page at a time (keyset:
    pages stay right while the persona remembers more)."""
    records = await callers.records.page(persona_id, owner, before=before, limit=limit)
    return MemoryPage(
        persona=persona_id,
        caller=owner,
        items=[_item(owner, record) for record in records],
        next=records[-1].seq if len(records) == limit else None,
    )


@router.get(
    f"{_BASE}/search",
    dependencies=[MemoryReader],
    response_model=SearchResults,
    responses=_responses(400, 404, 409, 422),
)
async def search_memories(
    persona_id: str,
    owner: MemoryReadOwner,
    callers: CallerStore,
    q: Annotated[str, Query(min_length=1, max_length=4000, description="what to look for")],
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> SearchResults:
    """The caller's memories with the persona most relevant to ``q``, best first: the
    retrieval the prompt uses (meaning and keywords, fused by rank), without its token
    budget."""
    try:
        records = await callers.records.search(persona_id, owner, q, limit=limit)
    except MemoryOff as error:
        raise _off(error) from None
    return SearchResults(
        persona=persona_id,
        caller=owner,
        query=q,
        items=[_item(owner, record) for record in records],
    )


@router.get(
    f"{_BASE}/export",
    dependencies=[MemoryReader],
    responses={
        200: {
            "description": "Every memory, oldest first: a JSON document, or JSON Lines",
            "content": {"application/json": {}, "application/x-ndjson": {}},
        },
        **_responses(400, 404, 422),
    },
)
async def export_memories(
    request: Request,
    persona_id: str,
    owner: MemoryReadOwner,
    callers: CallerStore,
    format: Annotated[
        Literal["json", "jsonl"],
        Query(description="json: one document; jsonl: one memory a line"),
    ] = "json",
) -> StreamingResponse:
    """Every memory of the caller's with the persona, oldest first, streamed: ``json``, a
    document ``{"persona", "caller", "exportedAt", "memories": [...]}``; ``jsonl``, one
    memory a line. Each memory as the list shows it (no vectors: they are the hub's)."""
    audit_memory(request, "memory.export", persona_id, caller=owner)
    records = callers.records

    async def items() -> AsyncIterator[str]:
        after = 0
        while True:
            page = await records.oldest_after(persona_id, owner, after=after, limit=_EXPORT_PAGE)
            for record in page:
                yield _item(owner, record).model_dump_json()
            if len(page) < _EXPORT_PAGE:
                return
            after = page[-1].seq

    async def jsonl() -> AsyncIterator[str]:
        async for line in items():
            yield line + "\n"

    async def document() -> AsyncIterator[str]:
        head = {
            "persona": persona_id,
            "caller": owner,
            "exportedAt": datetime.now(UTC).isoformat(),
        }
        yield json.dumps(head)[:-1] + ', "memories": ['
        first = True
        async for line in items():
            yield line if first else "," + line
            first = False
        yield "]}\n"

    name = f"memories-{persona_id}.{format}"
    return StreamingResponse(
        jsonl() if format == "jsonl" else document(),
        media_type="application/x-ndjson" if format == "jsonl" else "application/json",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.get(
    f"{_BASE}/{{memory_id}}",
    dependencies=[MemoryReader],
    response_model=MemoryItem,
    responses=_responses(400, 404, 422),
)
async def get_memory(
    persona_id: str,
    owner: MemoryReadOwner,
    memory_id: MemoryId,
    callers: CallerStore,
) -> MemoryItem:
    """One of the caller's memories with the persona (404 if it is not the caller's)."""
    record = await callers.records.get(persona_id, owner, memory_id)
    if record is None:
        raise _not_found(persona_id, memory_id)
    return _item(owner, record)


@router.patch(
    f"{_BASE}/{{memory_id}}",
    dependencies=[MemoryWriter],
    response_model=MemoryItem,
    responses=_responses(400, 404, 409, 415, 422),
)
async def edit_memory(
    request: Request,
    persona_id: str,
    owner: MemoryWriteOwner,
    memory_id: MemoryId,
    edit: MemoryEdit,
    callers: CallerStore,
) -> MemoryItem:
    """Change a memory's text: the edited memory gets a new id and a new vector (it is
    found by its new text from the next turn on), and the time of the edit."""
    try:
        record = await callers.records.edit(persona_id, owner, memory_id, edit.text)
    except MemoryOff as error:
        raise _off(error) from None
    if record is None:
        raise _not_found(persona_id, memory_id)
    audit_memory(
        request, "memory.update", persona_id, caller=owner, memory=memory_id, newId=record.seq
    )
    return _item(owner, record)


@router.delete(
    f"{_BASE}/{{memory_id}}",
    dependencies=[MemoryWriter],
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_responses(400, 404, 422),
)
async def delete_memory(
    request: Request,
    persona_id: str,
    owner: MemoryWriteOwner,
    memory_id: MemoryId,
    callers: CallerStore,
) -> Response:
    """Forget one memory (404 if it is not the caller's)."""
    if not await callers.records.delete(persona_id, owner, memory_id):
        raise _not_found(persona_id, memory_id)
    audit_memory(request, "memory.delete", persona_id, caller=owner, memory=memory_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete(
    "/memories",
    dependencies=[MemoryWriter],
    response_model=Forgotten,
    responses=_responses(400, 422),
)
async def forget_caller(
    request: Request, callers: CallerStore, caller: CallerQuery = None
) -> Forgotten:
    """The right to be forgotten: delete everything the caller left with every persona
    (memories, conversations, tasks, documents), recorded in the audit log with who asked, whom,
    and how many rows went."""
    owner = caller_owner(request, Action.MEMORY_WRITE, None, caller)
    gone = await callers.forget(owner)
    audit_memory(
        request,
        "memory.forget",
        None,
        caller=owner,
        memories=gone.memories,
        conversations=gone.conversations,
        messages=gone.messages,
        tasks=gone.tasks,
        documents=gone.documents,
        userPersonas=gone.user_personas,
    )
    return Forgotten(
        caller=owner,
        memories=gone.memories,
        conversations=gone.conversations,
        messages=gone.messages,
        tasks=gone.tasks,
        documents=gone.documents,
        userPersonas=gone.user_personas,
    )


def _not_found(persona_id: str, memory_id: int) -> HTTPException:
    return HTTPException(
        status.HTTP_404_NOT_FOUND,
        f"No memory {memory_id} of the caller's with persona '{persona_id}'",
    )
