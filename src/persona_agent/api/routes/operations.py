"""Operations: liveness (``/healthz``), readiness (``/readyz``) and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from persona_agent.api.deps import HubReader, Metrics, Ready, Registry
from persona_agent.api.routes.error_body import ErrorDetail
from persona_agent.observe.metrics import CONTENT_TYPE_LATEST

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz(registry: Registry) -> JSONResponse:
    """The process serves (liveness)."""
    return JSONResponse({"status": "ok", "personas": len(registry)})


@router.get("/readyz")
async def readyz(readiness: Ready) -> JSONResponse:
    """Readiness: the database answers within two seconds, the personas are loaded, and
    the model backend can answer at once (the embedded model loaded: a probe starts
    loading it when start-up did not). 503, naming what is not ready in ``notReady``,
    so a load balancer sends requests elsewhere meanwhile."""
    body, not_ready = await readiness.check()
    if not_ready:
        return JSONResponse(
            {**body, "status": "unavailable", "notReady": not_ready}, status_code=503
        )
    return JSONResponse({**body, "status": "ready", "notReady": []})


@router.get(
    "/metrics",
    dependencies=[HubReader],
    response_class=Response,
    responses={
        200: {
            "description": "The metrics, in Prometheus' text format",
            "content": {CONTENT_TYPE_LATEST.split(";")[0]: {}},
        },
        401: {"model": ErrorDetail, "description": "No credential, or a wrong one"},
        403: {
            "model": ErrorDetail,
            "description": "Not personas:read, or a key for some personas only",
        },
        404: {"model": ErrorDetail, "description": "Metrics are off"},
    },
)
async def prometheus_metrics(metrics: Metrics) -> Response:
    """Prometheus metrics, in the text format (``personas:read`` for every persona when
    credentials are configured; 404 with ``PERSONA_AGENT_METRICS=false``)."""
    if not metrics.enabled:
        return JSONResponse(
            {"detail": "Metrics are off (PERSONA_AGENT_METRICS=false)"}, status_code=404
        )
    return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
