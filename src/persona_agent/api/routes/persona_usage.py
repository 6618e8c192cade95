"""``/api/v1/personas/{persona_id}/usage``: what a persona's answers used and cost."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Query
from fastapi.exceptions import RequestValidationError

from persona_agent.api.deps import PersonaReader, Store, Usage
from persona_agent.api.routes.error_body import error_responses
from persona_agent.api.routes.persona_resource import persona_router

__all__ = ["router"]

router = persona_router()


@router.get("/{persona_id}/usage", dependencies=[PersonaReader], responses=error_responses(404))
async def persona_usage(
    persona_id: str,
    store: Store,
    usage: Usage,
    since: Annotated[
        datetime | None, Query(description="from this time on (ISO 8601; default: the start)")
    ] = None,
    until: Annotated[
        datetime | None, Query(description="before this time (ISO 8601; default: now)")
    ] = None,
) -> dict[str, Any]:
    """What the persona's completed answers used and cost in a time window: tokens, US
    dollars (for models with a price, ``PERSONA_AGENT_LLM_PRICES``), by model. The sums of
    the cost-v1 data of the same answers."""
    await store.get(persona_id)  # 404 for an unknown persona
    end = until or datetime.now(UTC)
    start = since or datetime.fromtimestamp(0, UTC)
    start, end = (_aware(moment) for moment in (start, end))
    if start >= end:
        raise RequestValidationError(
            [
                {
                    "loc": ("query", "since"),
                    "msg": "since must be before until",
                    "type": "value_error",
                }
            ]
        )
    totals = await usage.totals(
        persona_id, int(start.timestamp() * 1000), int(end.timestamp() * 1000)
    )
    return {
        "persona": persona_id,
        "since": start.isoformat(),
        "until": end.isoformat(),
        "answers": totals.answers,
        "promptTokens": totals.prompt_tokens,
        "completionTokens": totals.completion_tokens,
        "cachedPromptTokens": totals.cached_prompt_tokens,
        "costUsd": totals.cost_usd,
        "unpricedAnswers": totals.unpriced_answers,
        "byModel": [
            {
                "model": entry.model,
                "answers": entry.answers,
                "promptTokens": entry.prompt_tokens,
                "completionTokens": entry.completion_tokens,
                "cachedPromptTokens": entry.cached_prompt_tokens,
                "costUsd": entry.cost_usd,
            }
            for entry in totals.by_model
        ],
    }


def _aware(moment: datetime) -> datetime:
    """A time without a zone is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
