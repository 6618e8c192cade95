"""The handshake-era cancels of a stateless ``/mcp`` (:class:`.CallsInFlight`): a cancel
that overtook its call cancels it as it starts, for a while and for so many calls only;
one caller's cancel never reaches another's call of the same ids."""

from __future__ import annotations

import asyncio

from persona_agent.api.mcp.mcp_stateless import REMEMBERED, CallsInFlight, call_key


async def _forever() -> None:
    await asyncio.Event().wait()


async def test_a_cancel_that_came_first_cancels_its_call_as_it_starts() -> None:
    calls = CallsInFlight()
    key = call_key("key:alice", "client-1", 7)
    await calls.cancel(key)  # its call runs nowhere yet
    async with asyncio.timeout(60):
        assert await calls.run(_forever(), key) is False
    assert len(calls) == 0


async def test_a_cancel_names_one_caller_one_client_one_id() -> None:
    calls = CallsInFlight()
    ran: list[bool] = []

    async def answer() -> None:
        await asyncio.sleep(0)

    for other in (
        call_key("key:bob", "client-1", 7),  # another caller
        call_key("key:alice", "client-2", 7),  # another client of the caller
        call_key("key:alice", "client-1", "7"),  # "7" is not 7
    ):
        await calls.cancel(other)
    async with asyncio.timeout(60):
        ran.append(await calls.run(answer(), call_key("key:alice", "client-1", 7)))
    assert ran == [True]


async def test_early_cancels_are_kept_for_a_while_and_so_many() -> None:
    now = [0.0]
    calls = CallsInFlight(remember=60.0, clock=lambda: now[0])
    old = call_key("key:alice", "c", 1)
    await calls.cancel(old)
    now[0] = 61.0
    for i in range(REMEMBERED + 5):
        await calls.cancel(call_key("key:alice", "c", 1000 + i))

    async def answer() -> None:
        await asyncio.sleep(0)

    async with asyncio.timeout(60):
        assert await calls.run(answer(), old) is True  # forgotten: too old
        # The first few of the many were pushed out; the latest is still kept.
        assert await calls.run(answer(), call_key("key:alice", "c", 1000)) is True
        assert (
            await calls.run(_forever(), call_key("key:alice", "c", 1000 + REMEMBERED + 4)) is False
        )


async def test_a_running_call_is_canceled_by_an_announcement_from_another_replica() -> None:
    calls = CallsInFlight()
    key = call_key("key:alice", "client-1", 3)
    started = asyncio.Event()

    async def call() -> None:
        started.set()
        await _forever()

    running = asyncio.ensure_future(calls.run(call(), key))
    async with asyncio.timeout(60):
        await started.wait()
        assert len(calls) == 1
        calls.announced('["key:alice", "client-1", "3"]')
        assert await running is False
    calls.announced("not json")  # a stray payload is ignored
