"""``/api/v1/personas/{persona_id}/conversation-documents``: the documents a caller
attached to its conversations with a persona (A2A file parts), listed and deleted one by
one (docs/knowledge.md).

As memory (:mod:`persona_agent.api.routes.memories`), they are the caller's own: a
caller sees and deletes only its own (``key:{name}``, ``oidc:{sub}``), a principal with
``memory:admin`` names another with ``caller=``, and another caller's document is
answered 404, as one that does not exist.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status

from persona_agent.api.deps import (
    Documents,
    MemoryReader,
    MemoryReadOwner,
    MemoryWriteOwner,
    MemoryWriter,
    audit_memory,
)
from persona_agent.api.routes.error_body import ErrorDetail, error_responses
from persona_agent.conversations.keys import conversation_key
from persona_agent.memory.records import context_id_of

__all__ = ["router"]

router = APIRouter(tags=["memory"], responses=error_responses(401, 403))

_BASE = "/personas/{persona_id}/conversation-documents"
_REASONS = {
    400: "A hub without authentication, and no caller named (caller=)",
    404: "No such persona, or no such document in the caller's conversations with it",
    422: "A parameter is not valid",
}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorDetail, "description": reason} for code, reason in _REASONS.items()
}


@router.get(_BASE, dependencies=[MemoryReader], responses=_RESPONSES)
async def list_attached(
    persona_id: str,
    owner: MemoryReadOwner,
    documents: Documents,
    context_id: Annotated[
        str | None,
        Query(alias="contextId", min_length=1, max_length=200, description="one conversation"),
    ] = None,
) -> dict[str, Any]:
    """The documents the caller attached to its conversations with the persona (A2A file
    parts), the oldest first, each with its conversation's ``contextId``; with
    ``contextId``, those of that conversation only."""
    attached = await documents.attached(persona_id, conversation_key(owner, ""))
    if context_id is not None:
        key = conversation_key(owner, context_id)
        attached = [document for document in attached if document.conversation == key]
    return {
        "persona": persona_id,
        "caller": owner,
        "documents": [
            {**document.as_json(), "contextId": context_id_of(owner, document.conversation)}
            for document in attached
        ],
    }


@router.delete(
    f"{_BASE}/{{document_id}}",
    dependencies=[MemoryWriter],
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_RESPONSES,
)
async def delete_attached(
    request: Request,
    persona_id: str,
    owner: MemoryWriteOwner,
    document_id: str,
    documents: Documents,
) -> Response:
    """Delete one document the caller attached to a conversation with the persona, and its
    passages: later turns of that conversation no longer read it (404 if it is not the
    caller's)."""
    await documents.delete_attached(persona_id, conversation_key(owner, ""), document_id)
    audit_memory(request, "memory.document.delete", persona_id, caller=owner, document=document_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
