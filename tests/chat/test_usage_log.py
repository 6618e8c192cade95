"""UsageLog on real databases (a SQLite file and PostgreSQL): each answer recorded, a
persona's totals by model over a time window (priced and unpriced answers apart), and a
deleted persona's records gone."""

from __future__ import annotations

import time

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.chat.usage_log import ModelUsage, UsageLog, UsageTotals
from persona_agent.db import GroupCommitWriter
from persona_agent.llm.base import Usage


async def test_totals_by_model_over_a_window(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    log = UsageLog(writer)
    before = int(time.time() * 1000)
    await log.record("ada", "gpt-b", Usage(100, 20, 10), 0.25)
    await log.record("ada", "gpt-b", Usage(200, 30, 0), 0.5)
    await log.record("ada", "gpt-a", Usage(7, 3, 0), None)  # no price
    await log.record("bob", "gpt-a", Usage(1_000, 1_000, 0), 9.0)  # another persona's
    after = int(time.time() * 1000) + 1

    totals = await log.totals("ada", before, after)
    assert totals.by_model == [  # in the models' order
        ModelUsage("gpt-a", 1, 7, 3, 0, None),
        ModelUsage("gpt-b", 2, 300, 50, 10, 0.75),  # exact in binary
    ]
    assert (totals.answers, totals.prompt_tokens, totals.completion_tokens) == (3, 307, 53)
    assert totals.cached_prompt_tokens == 10
    assert totals.cost_usd == pytest.approx(0.75)
    assert totals.unpriced_answers == 1
    assert await log.totals("ada", after, after + 60_000) == UsageTotals()  # none in it
    assert await log.totals("ada", before - 60_000, before) == UsageTotals()


async def test_a_deleted_persona_s_records_go(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    log = UsageLog(writer)
    await log.record("ada", "gpt-a", Usage(1, 1, 0), 0.1)
    await log.record("bob", "gpt-a", Usage(2, 2, 0), None)
    await log.forget_persona("ada")
    assert (await log.totals("ada", 0, 2**62)).answers == 0
    bob = await log.totals("bob", 0, 2**62)
    assert (bob.answers, bob.prompt_tokens, bob.unpriced_answers) == (1, 2, 1)
