"""``/api/v1/personas/{persona_id}/documents``: a persona's knowledge documents, uploaded,
listed and deleted (docs/knowledge.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import File, Request, Response, UploadFile, status
from fastapi.responses import JSONResponse

from persona_agent.api.deps import Documents, PersonaReader, PersonaWriter, Store
from persona_agent.api.routes.error_body import error_responses
from persona_agent.api.routes.persona_resource import audited, persona_router
from persona_agent.errors import DocumentTooLargeError

__all__ = ["router"]

router = persona_router()

_UPLOAD_ERRORS = {
    **error_responses(400, 404, 415),
    409: {"description": "The persona has as many documents (or passages) as it may have"},
    413: {"description": "The file is over the byte limit, or makes too many passages"},
    422: {"description": "The file cannot be read (corrupt, not UTF-8, no text)"},
}


@router.post(
    "/{persona_id}/documents",
    dependencies=[PersonaWriter],
    status_code=status.HTTP_201_CREATED,
    responses=_UPLOAD_ERRORS,
)
@audited("persona.document.upload")
async def upload_document(
    persona_id: str,
    request: Request,
    store: Store,
    documents: Documents,
    file: Annotated[
        UploadFile, File(description="A document: .txt, .md, .html or .pdf (multipart)")
    ],
) -> JSONResponse:
    """Add a document to the persona's knowledge: read, cut into passages, embedded; the
    passages relevant to each turn go into the prompt, and the answer cites them. A
    document of the same name is replaced. A file that cannot be taken gets a 4xx naming
    it (415 its type, 413 its size or passages, 409 the persona's limits, 422 unreadable),
    and nothing stored changes."""
    await store.get(persona_id)  # 404 before the file is read
    name = file.filename or "document"
    limit = documents.limits.max_bytes
    data = await file.read(limit + 1)  # the whole body is bounded (security/ingress/body_limits.py)
    if len(data) > limit:
        raise DocumentTooLargeError(
            f"{name}: over the limit of {limit:,} bytes (PERSONA_AGENT_KNOWLEDGE_MAX_BYTES)"
        )
    document = await documents.add(persona_id, name, data, file.content_type)
    location = f"{request.url.path}/{document.id}"
    # A response, not a dict: the audit log would take the document's id for the persona's.
    return JSONResponse(document.as_json(), status_code=201, headers={"Location": location})


@router.get("/{persona_id}/documents", dependencies=[PersonaReader], responses=error_responses(404))
async def list_documents(persona_id: str, store: Store, documents: Documents) -> dict[str, Any]:
    """The persona's documents (not those attached to one conversation over A2A), the
    oldest first."""
    await store.get(persona_id)
    return {
        "persona": persona_id,
        "documents": [document.as_json() for document in await documents.documents(persona_id)],
    }


@router.delete(
    "/{persona_id}/documents/{document_id}",
    dependencies=[PersonaWriter],
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404),
)
@audited("persona.document.delete")
async def delete_document(
    persona_id: str, document_id: str, request: Request, store: Store, documents: Documents
) -> Response:
    """Delete one of the persona's documents and its passages (404: none of this id)."""
    await store.get(persona_id)
    await documents.delete(persona_id, document_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
