"""Telemetry: the hub's metrics, and traces when the ``OTEL_*`` environment asks for them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from persona_agent.observe.metrics import HubMetrics
from persona_agent.observe.tracing import start_tracing
from persona_agent.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["Telemetry", "build_telemetry"]


@dataclass
class Telemetry:
    """Metrics, and traces when the ``OTEL_*`` environment asks for them."""

    metrics: HubMetrics
    tracer_provider: TracerProvider | None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if self.tracer_provider is not None:  # the spans not yet sent go now
                await asyncio.to_thread(self.tracer_provider.shutdown)


def build_telemetry(settings: Settings) -> Telemetry:
    """Tracing (off unless OTEL_* asks: docs/observability.md) and the hub's metrics."""
    tracer_provider = start_tracing(os.environ)
    metrics = HubMetrics() if settings.metrics else HubMetrics.disabled()
    return Telemetry(metrics, tracer_provider)
