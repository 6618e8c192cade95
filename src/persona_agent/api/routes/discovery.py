"""Discovery: every agent card at once, the hub's own card, the personas listed, and the
cards' signing key."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from persona_agent.a2a.cards import A2A_PREFIX, CARD_PATH
from persona_agent.a2a.router import card_response
from persona_agent.api.deps import Registry, Signer
from persona_agent.api.routes.error_body import ErrorDetail
from persona_agent.personas.panel_listing import panel_listing, with_panels
from persona_agent.security.card_signing import JWKS_PATH

__all__ = ["router"]

router = APIRouter(tags=["discovery"])


@router.get("/.well-known/agent.json")
async def aggregate_card(registry: Registry) -> dict[str, Any]:
    """Every persona's agent card, with the hub's own card (its directory agent's)."""
    return {
        "hub": registry.directory.card_dict,
        "agents": [app_.card_dict for app_ in registry.apps()],
        "panels": [
            {"id": persona.id, **panel}
            for persona in registry.personas()
            if (panel := panel_listing(persona)) is not None
        ],
    }


@router.get(CARD_PATH)
async def hub_card(request: Request, registry: Registry) -> Response:
    """The hub's own card: its directory agent, at ``/a2a/``, which answers any message
    with the personas and their card URLs (docs/a2a.md#the-hubs-own-agent)."""
    directory = registry.directory
    return card_response(request, directory.card_dict, directory.card_etag)


@router.get(f"{A2A_PREFIX}/personas")
async def list_personas(registry: Registry) -> list[dict[str, Any]]:
    """Every persona served: id, name, description, endpoint and card URL; a panel's
    mode, members and moderator too (``panel``)."""
    return with_panels(registry.directory.entries(), registry.persona)


@router.get(
    JWKS_PATH,
    responses={404: {"model": ErrorDetail, "description": "Agent cards are not signed"}},
)
async def card_keys(signer: Signer) -> JSONResponse:
    """The public key of the agent cards' signatures (404 when cards are not signed)."""
    if signer is None:
        return JSONResponse({"detail": "Agent cards are not signed"}, status_code=404)
    return JSONResponse(signer.jwks())
