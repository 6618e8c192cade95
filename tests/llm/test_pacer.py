"""The pacer hands a producer's items to one consumer in batches, as ``next_batch`` does a
queue's: the first at once, then what comes before the deadline, a final item at once."""

from __future__ import annotations

import asyncio
import time

from persona_agent.llm.base import MAX_BATCH, Pacer


def pacer() -> Pacer[int | None]:
    return Pacer(lambda item: item is None)


async def test_an_item_there_after_the_deadline_is_given_at_once() -> None:
    items = pacer()
    items.put(1)
    assert await items.batch(0.0) == [1]


async def test_the_consumer_waiting_past_its_deadline_is_woken_by_the_next_item() -> None:
    items = pacer()
    waiting = asyncio.create_task(items.batch(0.0))
    await asyncio.sleep(0)  # the consumer waits
    assert not waiting.done()
    items.put(1)
    assert await asyncio.wait_for(waiting, 60) == [1]


async def test_items_before_the_deadline_wait_for_it_and_a_final_item_ends_the_batch() -> None:
    items = pacer()
    waiting = asyncio.create_task(items.batch(time.monotonic() + 600))
    items.put(1)
    for _ in range(3):
        await asyncio.sleep(0)
    items.put(2)
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiting.done()  # held until the deadline, ten minutes away
    items.put(None)
    assert await asyncio.wait_for(waiting, 60) == [1, 2, None]


async def test_a_batch_is_due_at_the_deadline() -> None:
    items = pacer()
    items.put(1)
    items.put(2)
    # A deadline a moment away: the timer gives the batch without another item.
    assert await asyncio.wait_for(items.batch(time.monotonic() + 0.01), 60) == [1, 2]


async def test_a_batch_holds_at_most_max_batch_items_and_the_rest_come_next() -> None:
    items = pacer()
    for number in range(MAX_BATCH + 5):
        items.put(number)
    first = await asyncio.wait_for(items.batch(time.monotonic() + 600), 60)
    assert first == list(range(MAX_BATCH))
    assert await items.batch(0.0) == list(range(MAX_BATCH, MAX_BATCH + 5))
