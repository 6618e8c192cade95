"""``/api/v1/personas``: list, read, create, replace and delete personas, live."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Header, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError

from persona_agent.api.deps import (
    Auth,
    BaseUrl,
    PersonaData,
    PersonaLimits,
    PersonaReader,
    PersonaWriter,
    Reader,
    Store,
)
from persona_agent.api.routes.error_body import error_responses
from persona_agent.api.routes.persona_resource import (
    CREATES,
    PERSONA_EXAMPLE,
    audited,
    created,
    persona_router,
    resource,
    send,
    stored,
    validated,
)
from persona_agent.security.authorization import Action

__all__ = ["router"]

router = persona_router()


@router.get("", dependencies=[Reader])
async def list_personas(
    request: Request,
    store: Store,
    auth: Auth,
    base_url: BaseUrl,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Personas by id, a page at a time: those the caller's key lets it use."""
    every = await store.list()
    shown = set(auth.visible(request, [persona.id for persona in every]))
    personas = [persona for persona in every if persona.id in shown]
    page = personas[offset : offset + limit]
    return {
        "items": [resource(base_url, p) for p in page],
        "total": len(personas),
        "offset": offset,
        "limit": limit,
    }


@router.get("/{persona_id}", dependencies=[PersonaReader], responses=error_responses(404))
async def get_persona(
    persona_id: str, response: Response, store: Store, base_url: BaseUrl
) -> dict[str, Any]:
    """One persona; its ``ETag`` is the version to send back in ``If-Match``."""
    return send(response, base_url, await store.get(persona_id))


@router.post("", **CREATES)
@audited("persona.create")
async def create_persona(
    request: Request,
    response: Response,
    store: Store,
    auth: Auth,
    base_url: BaseUrl,
    limits: PersonaLimits,
    persona_data: PersonaData,
    body: Annotated[dict[str, Any], Body(examples=[PERSONA_EXAMPLE])],
) -> dict[str, Any]:
    """Create a persona (``id`` in the body); it answers over A2A as soon as this returns."""
    data = dict(body)
    persona_id = data.pop("id", None)
    if not isinstance(persona_id, str):
        raise RequestValidationError(
            [{"loc": ("body", "id"), "msg": "Field required (a string)", "type": "missing"}]
        )
    auth.authorize(request, Action.WRITE, persona_id)
    persona = validated(limits, persona_id, data)
    return await created(
        persona,
        store=store,
        persona_data=persona_data,
        response=response,
        base_url=base_url,
        collection=request.url.path,
    )


@router.put("/{persona_id}", dependencies=[PersonaWriter], responses=error_responses(400, 404, 412))
@audited("persona.update")
async def update_persona(
    persona_id: str,
    request: Request,
    response: Response,
    store: Store,
    base_url: BaseUrl,
    limits: PersonaLimits,
    body: Annotated[dict[str, Any], Body(examples=[PERSONA_EXAMPLE])],
    if_match: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Replace a persona. With ``If-Match``, only if it is still at that version (else 412)."""
    data = dict(body)
    if data.get("id", persona_id) != persona_id:
        raise RequestValidationError(
            [{"loc": ("body", "id"), "msg": "must match the id in the URL", "type": "value_error"}]
        )
    data.pop("id", None)
    data.pop("version", None)
    data.pop("links", None)
    persona = validated(limits, persona_id, data)
    kept = await stored(store.replace(persona, if_match=if_match))
    return send(response, base_url, kept)


@router.delete(
    "/{persona_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    dependencies=[PersonaWriter],
    responses=error_responses(404, 409, 412),
)
@audited("persona.delete")
async def delete_persona(
    persona_id: str,
    request: Request,
    store: Store,
    persona_data: PersonaData,
    if_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Delete a persona: its A2A endpoints answer 404 at once, and its tasks and
    conversations are deleted before this returns."""
    await store.delete(persona_id, if_match=if_match)
    await persona_data.settled(persona_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
