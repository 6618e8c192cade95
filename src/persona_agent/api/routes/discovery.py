"""Discovery: every agent card at once, the hub's own card, the personas listed, the AI
Catalog, and the cards' signing key; each with the ``Link`` to the AI Catalog."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from persona_agent.a2a.calls import CARD_CACHE_CONTROL, catalog_link, not_modified
from persona_agent.a2a.cards import A2A_PREFIX, CARD_PATH
from persona_agent.a2a.discovery.ai_catalog import AI_CATALOG_PATH, CATALOG_MEDIA_TYPE
from persona_agent.a2a.router import card_response
from persona_agent.api.deps import Registry, Signer
from persona_agent.api.routes.error_body import ErrorDetail
from persona_agent.personas.panel_listing import panel_listing, with_panels
from persona_agent.security.card_signing import JWKS_PATH

__all__ = ["router"]

router = APIRouter(tags=["discovery"])


@router.get(
    "/.well-known/agent.json",
    responses={304: {"description": "Not modified (If-None-Match)"}},
)
async def aggregate_card(request: Request, registry: Registry) -> Response:
    """Every persona's agent card, with the hub's own card (its directory agent's);
    ``ETag`` and ``Cache-Control`` as each card has them, ``304`` on ``If-None-Match``."""
    apps = registry.apps()
    panels = [
        {"id": persona.id, **panel}
        for persona in registry.personas()
        if (panel := panel_listing(persona)) is not None
    ]
    # The cards' own ETags name them; the panels' listing is small and hashed as it is.
    digest = hashlib.sha256(registry.directory.card_etag.encode())
    for app_ in apps:
        digest.update(app_.card_etag.encode())
    digest.update(orjson.dumps(panels, option=orjson.OPT_SORT_KEYS))
    etag = f'W/"{digest.hexdigest()[:32]}"'
    headers = {"ETag": etag, "Cache-Control": CARD_CACHE_CONTROL}
    catalog_link(headers)
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    body = {
        "hub": registry.directory.card_dict,
        "agents": [app_.card_dict for app_ in apps],
        "panels": panels,
    }
    return JSONResponse(body, headers=headers)


@router.get(CARD_PATH)
async def hub_card(request: Request, registry: Registry) -> Response:
    """The hub's own card: its directory agent, at ``/a2a/``, which answers any message
    with the personas and their card URLs (docs/a2a.md#the-hubs-own-agent)."""
    directory = registry.directory
    return card_response(request, directory.card_dict, directory.card_etag)


@router.get(
    AI_CATALOG_PATH,
    response_class=Response,
    responses={
        200: {
            "description": "The AI Catalog (docs/discovery.md)",
            "content": {CATALOG_MEDIA_TYPE: {"schema": {"type": "object"}}},
        },
        304: {"description": "Not modified (If-None-Match)"},
    },
)
async def ai_catalog(request: Request, registry: Registry) -> Response:
    """The AI Catalog: every persona and panel, and the hub's directory agent, each an
    A2A agent card entry (signed when the cards are); ``ETag``, ``304`` on
    ``If-None-Match``."""
    built = registry.catalog.current()
    headers = {"ETag": built.etag, "Cache-Control": CARD_CACHE_CONTROL}
    catalog_link(headers)
    if not_modified(request, built.etag):
        return Response(status_code=304, headers=headers)
    return Response(built.body, media_type=CATALOG_MEDIA_TYPE, headers=headers)


@router.get(f"{A2A_PREFIX}/personas")
async def list_personas(registry: Registry, response: Response) -> list[dict[str, Any]]:
    """Every persona served: id, name, description, endpoint and card URL; a panel's
    mode, members and moderator too (``panel``)."""
    catalog_link(response.headers)
    return with_panels(registry.directory.entries(), registry.persona)


@router.get(
    JWKS_PATH,
    responses={404: {"model": ErrorDetail, "description": "Agent cards are not signed"}},
)
async def card_keys(signer: Signer) -> JSONResponse:
    """The public key of the agent cards' signatures (404 when cards are not signed)."""
    if signer is None:
        return JSONResponse({"detail": "Agent cards are not signed"}, status_code=404)
    response = JSONResponse(signer.jwks())
    catalog_link(response.headers)
    return response
