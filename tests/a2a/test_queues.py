"""The SDK's event queues on asyncio (persona_agent.a2a.queues): each scenario runs on the
queue the SDK makes itself on this Python and on ShutdownQueue, and both must agree."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import pytest
from a2a.server.agent_execution import active_task
from a2a.server.events import event_queue_v2
from a2a.types.a2a_pb2 import Message, Part, Role
from a2a.utils import _async_queue_compat as compat

from persona_agent.a2a import queues
from persona_agent.a2a.queues import ShutdownQueue, use_asyncio_queues

MakeQueue = Callable[..., Any]
MAKERS: list[MakeQueue] = [queues._sdk_create_queue, ShutdownQueue]
"""The SDK's own queue for this Python (culsans before 3.13), and the hub's."""

each_queue = pytest.mark.parametrize("make", MAKERS, ids=["sdk", "hub"])


@each_queue
async def test_after_shutdown_puts_are_refused_and_what_is_queued_is_still_got(
    make: MakeQueue,
) -> None:
    queue = make()
    await queue.put("a")
    queue.put_nowait("b")
    queue.shutdown()
    with pytest.raises(compat.QueueShutDown):
        await queue.put("c")
    with pytest.raises(compat.QueueShutDown):
        queue.put_nowait("c")
    assert [await queue.get(), queue.get_nowait()] == ["a", "b"]
    with pytest.raises(compat.QueueShutDown):
        await queue.get()
    with pytest.raises(compat.QueueShutDown):
        queue.get_nowait()


@each_queue
async def test_an_immediate_shutdown_drops_what_is_queued_and_join_returns(
    make: MakeQueue,
) -> None:
    queue = make()
    for item in range(3):
        await queue.put(item)
    assert await queue.get() == 0  # got, not yet done
    queue.shutdown(immediate=True)
    assert queue.empty()
    with pytest.raises(compat.QueueShutDown):
        await queue.get()
    queue.task_done()  # the one that was got
    await asyncio.wait_for(queue.join(), 1)


@each_queue
async def test_a_waiting_getter_and_a_waiting_putter_wake_on_shutdown(make: MakeQueue) -> None:
    empty, full = make(), make(maxsize=1)
    await full.put("x")
    assert full.full()
    getter = asyncio.ensure_future(empty.get())
    putter = asyncio.ensure_future(full.put("y"))
    await asyncio.sleep(0.01)
    assert not getter.done()
    assert not putter.done()
    empty.shutdown()
    full.shutdown()
    for waiting in (getter, putter):
        with pytest.raises(compat.QueueShutDown):
            await asyncio.wait_for(waiting, 1)
    assert await full.get() == "x"  # a plain shutdown keeps what was queued


@each_queue
async def test_before_shutdown_it_is_a_fifo_queue_with_task_accounting(make: MakeQueue) -> None:
    queue = make(maxsize=2)
    getter = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0.01)
    await queue.put(1)
    assert await asyncio.wait_for(getter, 1) == 1
    await queue.put(2)
    await queue.put(3)
    putter = asyncio.ensure_future(queue.put(4))  # waits for room
    await asyncio.sleep(0.01)
    assert not putter.done()
    assert queue.full()
    assert await queue.get() == 2
    await asyncio.wait_for(putter, 1)
    assert [await queue.get(), await queue.get()] == [3, 4]
    assert queue.empty()
    joined = asyncio.ensure_future(queue.join())
    await asyncio.sleep(0.01)
    assert not joined.done()  # four got, none done yet
    for _ in range(4):
        queue.task_done()
    await asyncio.wait_for(joined, 1)


@each_queue
async def test_a_cancelled_getter_leaves_the_item_to_the_next(make: MakeQueue) -> None:
    queue = make()
    first = asyncio.ensure_future(queue.get())
    second = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0.01)
    first.cancel()
    await queue.put("only")
    assert await asyncio.wait_for(second, 1) == "only"
    assert first.cancelled()


async def test_the_sdk_makes_its_event_queues_with_shutdown_queue() -> None:
    changed = use_asyncio_queues()
    if sys.version_info >= (3, 13):  # the SDK makes asyncio.Queue itself
        assert changed == 0
        assert vars(active_task)["create_async_queue"] is queues._sdk_create_queue
        return
    assert use_asyncio_queues() == 0  # a second call finds nothing left to change
    assert vars(active_task)["create_async_queue"] is ShutdownQueue
    source = event_queue_v2.EventQueueSource()
    assert isinstance(source.queue, ShutdownQueue)
    tapped = await source.tap()
    sent = Message(message_id="m1", role=Role.ROLE_AGENT, parts=[Part(text="hello")])
    await source.enqueue_event(sent)
    assert await asyncio.wait_for(tapped.dequeue_event(), 1) == sent
    assert await asyncio.wait_for(source.dequeue_event(), 1) == sent
    tapped.task_done()
    source.task_done()
    await asyncio.wait_for(source.close(), 1)  # returns once every event is done
    with pytest.raises(compat.QueueShutDown):
        await source.tap()
