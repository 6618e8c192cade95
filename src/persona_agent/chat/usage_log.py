"""Usage: what each persona's answers used and cost, kept for reports.

One row per completed answer (tokens in, out and from the server's cache, and the cost
when the model has a price), written in the database's group commit with the rest of the
turn. :meth:`UsageLog.totals` sums a persona's rows over a time window, by model: the
numbers ``GET /api/v1/personas/{id}/usage`` reports: the persona's own model calls (a
task's cost-v1 adds its consultations', which are recorded under the persona consulted).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.llm.base import Usage

__all__ = ["ModelUsage", "UsageLog", "UsageTotals"]

_INSERT = Sql(
    "INSERT INTO pa_usage (persona_id, model, at_ms, prompt_tokens, completion_tokens, "
    "cached_prompt_tokens, cost_usd) VALUES (:persona_id, :model, :at_ms, :prompt_tokens, "
    ":completion_tokens, :cached_prompt_tokens, :cost_usd)",
    table="pa_usage",
)
_DELETE = Sql("DELETE FROM pa_usage WHERE pa_usage.persona_id = :persona_id", table="pa_usage")
_TOTALS = Sql(
    "SELECT pa_usage.model, count(*), sum(pa_usage.prompt_tokens), "
    "sum(pa_usage.completion_tokens), sum(pa_usage.cached_prompt_tokens), "
    "sum(pa_usage.cost_usd), count(pa_usage.cost_usd) FROM pa_usage "
    "WHERE pa_usage.persona_id = :persona_id AND pa_usage.at_ms >= :since "
    "AND pa_usage.at_ms < :until GROUP BY pa_usage.model ORDER BY pa_usage.model",
    table="pa_usage",
)


@dataclass
class ModelUsage:
    model: str
    answers: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float | None = None
    """None when no answer of the model had a price."""


@dataclass
class UsageTotals:
    answers: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    """Of the answers whose model has a price."""
    unpriced_answers: int = 0
    by_model: list[ModelUsage] = field(default_factory=list)


class UsageLog:
    """Rows of ``pa_usage`` through the hub's group-commit writer."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer

    async def record(
        self, persona_id: str, model: str, usage: Usage, cost_usd: float | None
    ) -> None:
        """Add one completed answer (returns once committed)."""
        row: dict[str, Any] = {
            "persona_id": persona_id,
            "model": model[:200],
            "at_ms": int(time.time() * 1000),
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_prompt_tokens": usage.cached_prompt_tokens,
            "cost_usd": cost_usd,
        }
        await self._db.write(_INSERT, [row])

    async def forget_persona(self, persona_id: str) -> None:
        """Delete a persona's records (it was deleted: a new persona with its id starts
        with none)."""
        await self._db.write(_DELETE, [{"persona_id": persona_id}])

    async def totals(self, persona_id: str, since_ms: int, until_ms: int) -> UsageTotals:
        """A persona's answers completed in ``[since_ms, until_ms)`` (ms since the epoch)."""
        rows = await self._db.fetch(
            _TOTALS, {"persona_id": persona_id, "since": since_ms, "until": until_ms}
        )
        totals = UsageTotals()
        for model, answers, prompt, completion, cached, cost, priced in rows:
            entry = ModelUsage(
                model=model,
                answers=int(answers),
                prompt_tokens=int(prompt or 0),
                completion_tokens=int(completion or 0),
                cached_prompt_tokens=int(cached or 0),
                cost_usd=float(cost) if priced else None,
            )
            totals.by_model.append(entry)
            totals.answers += entry.answers
            totals.prompt_tokens += entry.prompt_tokens
            totals.completion_tokens += entry.completion_tokens
            totals.cached_prompt_tokens += entry.cached_prompt_tokens
            totals.cost_usd += entry.cost_usd or 0.0
            totals.unpriced_answers += entry.answers - int(priced)
        return totals
