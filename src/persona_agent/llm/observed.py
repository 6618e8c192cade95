"""A model call seen from outside: a span of it (OpenTelemetry's GenAI conventions) and
its count and tokens in the hub's metrics, around any backend's stream.

Every call the hub makes to its chat model goes through :func:`observed_stream`: a turn's
(:mod:`persona_agent.chat.engine`) and a running summary's
(:mod:`persona_agent.hub.memory_part`), so ``persona_agent_llm_calls`` and
``persona_agent_llm_tokens`` count them all, and each is a ``chat {model}`` span
(docs/observability.md).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from opentelemetry.trace import SpanKind

from persona_agent.llm.base import ChatRequest, LLMBackend, StreamEnd, StreamItem, TextDelta
from persona_agent.observe.metrics import HubMetrics
from persona_agent.observe.tracing import TRACER

__all__ = ["PURPOSE_ATTRIBUTE", "observed_stream"]

PURPOSE_ATTRIBUTE = "persona_agent.llm.purpose"
"""The span attribute that says what a call other than a turn's answer is for (``summary``)."""


async def observed_stream(
    llm: LLMBackend,
    request: ChatRequest,
    model: str,
    metrics: HubMetrics,
    *,
    purpose: str = "",
) -> AsyncGenerator[StreamItem, None]:
    """``llm``'s stream for ``request`` (to ``model``), in a ``chat {model}`` span with the
    request's settings, the time to the first text and the tokens, and counted in
    ``metrics`` as ok or error (an error is raised on, after it is counted)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": llm.name,
        "gen_ai.request.model": model,
    }
    if request.temperature is not None:
        attributes["gen_ai.request.temperature"] = request.temperature
    if request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    if purpose:
        attributes[PURPOSE_ATTRIBUTE] = purpose
    with TRACER.start_as_current_span(
        f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        sent = time.monotonic()
        first = True
        end = StreamEnd()
        try:
            async with aclosing(llm.stream(request)) as chunks:
                async for chunk in chunks:
                    if isinstance(chunk, StreamEnd):
                        end = chunk
                    elif first and isinstance(chunk, TextDelta) and chunk.text:
                        first = False
                        waited = time.monotonic() - sent
                        span.set_attribute("gen_ai.response.time_to_first_chunk", waited)
                    yield chunk
        except Exception:
            metrics.llm_call(model, end.usage, failed=True)
            raise
        metrics.llm_call(model, end.usage, failed=False)
        if span.is_recording():
            span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": end.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": end.usage.completion_tokens,
                    "gen_ai.usage.cache_read.input_tokens": end.usage.cached_prompt_tokens,
                    "gen_ai.response.finish_reasons": [end.finish_reason or ""],
                }
            )
