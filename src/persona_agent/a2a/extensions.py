"""A2A extensions that persona-agent declares on its cards."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import AgentExtension

from persona_agent.chat.events import Done

__all__ = [
    "COST_EXTENSION_URI",
    "COST_KIND",
    "GREETING_EXTENSION_URI",
    "cost_extension",
    "cost_payload",
    "greeting_extension",
    "integral_counts",
    "total_cost",
]

COST_EXTENSION_URI = "urn:persona-agent:extension:cost:v1"
"""The completed task's final message carries a DataPart with this payload:

``{"kind": "cost-v1", "usage": {"promptTokens", "completionTokens", "totalTokens"},
"durationMs", "model", "llmCalls", "toolCalls"}``, plus ``usage.cachedPromptTokens`` when
the model server read prompt tokens from its cache and ``costUsd`` when the model has a
price (:mod:`persona_agent.pricing`). Every field but ``model`` and ``costUsd`` is an
integer (on the JSON wire too: ``a2a/sdk_fixes/numbers.py``).
"""
COST_KIND = "cost-v1"
_COUNTS = ("durationMs", "llmCalls", "toolCalls")
_USAGE_COUNTS = ("promptTokens", "completionTokens", "totalTokens", "cachedPromptTokens")


def cost_extension() -> AgentExtension:
    return AgentExtension(
        uri=COST_EXTENSION_URI,
        description=(
            "The final message of a completed task carries a DataPart with token usage, "
            "duration and model (cost-v1)."
        ),
        required=False,
    )


GREETING_EXTENSION_URI = "urn:persona-agent:extension:greeting:v1"
"""The persona opens each new conversation with a greeting (a character card's
``first_mes``): ``params.greeting`` on the card, for a client to show before the first
message; the model sees it as its own first turn. ``params.alternateGreetings`` lists
the card's other greetings."""


def greeting_extension(greeting: str, alternates: list[str]) -> AgentExtension:
    """The card's greeting extension; texts with their macros already replaced."""
    return AgentExtension(
        uri=GREETING_EXTENSION_URI,
        description=(
            "Each new conversation opens with this greeting from the persona; show it "
            "before the first message."
        ),
        required=False,
        params={"greeting": greeting, "alternateGreetings": alternates},
    )


def cost_payload(done: Done) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "kind": COST_KIND,
        "usage": {
            "promptTokens": done.usage.prompt_tokens,
            "completionTokens": done.usage.completion_tokens,
            "totalTokens": done.usage.total_tokens,
        },
        "durationMs": done.duration_ms,
        "model": done.model,
        "llmCalls": done.llm_calls,
        "toolCalls": done.tool_calls,
    }
    if done.usage.cached_prompt_tokens:
        payload["usage"]["cachedPromptTokens"] = done.usage.cached_prompt_tokens
    if done.cost_usd is not None:
        payload["costUsd"] = round(done.cost_usd, 10)
    return payload


def total_cost(payloads: list[dict[str, Any]], duration_ms: int) -> dict[str, Any]:
    """One cost-v1 payload for several answers (a panel's turns): their tokens, model and
    tool calls added up, their price when every one has a price; ``duration_ms``: the
    whole's. ``model``: theirs when they share one, else ``mixed``."""
    usage = {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}
    cached = 0
    calls = {"llmCalls": 0, "toolCalls": 0}
    models: set[str] = set()
    prices: list[float] = []
    for payload in payloads:
        counts = payload.get("usage") or {}
        for name in usage:
            usage[name] += int(counts.get(name, 0))
        cached += int(counts.get("cachedPromptTokens", 0))
        for name in calls:
            calls[name] += int(payload.get(name, 0))
        models.add(str(payload.get("model", "")))
        if isinstance(payload.get("costUsd"), int | float):
            prices.append(float(payload["costUsd"]))
    if cached:
        usage["cachedPromptTokens"] = cached
    total: dict[str, Any] = {
        "kind": COST_KIND,
        "usage": usage,
        "durationMs": duration_ms,
        "model": models.pop() if len(models) == 1 else "mixed",
        **calls,
    }
    if payloads and len(prices) == len(payloads):
        total["costUsd"] = round(sum(prices), 10)
    return total


def integral_counts(payload: dict[str, Any]) -> bool:
    """Make, in place, the counts of a cost-v1 payload that a protobuf ``Struct`` turned
    into floats (``12.0``) integers again; whether any changed."""
    changed = False
    usage = payload.get("usage")
    for fields, names in ((payload, _COUNTS), (usage, _USAGE_COUNTS)):
        if not isinstance(fields, dict):
            continue
        for name in names:
            value = fields.get(name)
            if isinstance(value, float) and value.is_integer():
                fields[name] = int(value)
                changed = True
    return changed
