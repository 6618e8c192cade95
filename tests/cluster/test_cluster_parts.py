"""The replica parts on a real PostgreSQL: the versioned task store, the event stream on
LISTEN/NOTIFY, leases and advisory locks, two "replicas" in one process (each its own
engine and listening connection)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest
from a2a.server.cluster import ConcurrentTaskModificationError, TaskVersion, VersionedEvent
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    Artifact,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.context_keys import PERSONA_STATE_KEY
from persona_agent.cluster.advisory_locks import AdvisoryLocks
from persona_agent.cluster.leases import ReplicaLease
from persona_agent.cluster.notify import LISTENER_NAME, Listener
from persona_agent.cluster.task_events import PgTaskEventStream
from persona_agent.cluster.tasks import REPLICA_LOST, ClusterTaskStore, replicas_table
from persona_agent.db import GroupCommitWriter, create_engine

CONTEXT = ServerCallContext(state={PERSONA_STATE_KEY: "socrates"})
WAIT = 60.0
"""Seconds a test waits at most for what must happen: a safety bound against a hang, not a
timing (a catch-up timer it must not depend on waits an hour)."""


class Replica:
    """One replica's parts on its own engine."""

    def __init__(self, url: str, name: str, *, catch_up_interval: float = 5.0) -> None:
        self.engine = create_engine(url)
        self.writer = GroupCommitWriter(self.engine)
        self.tasks = ClusterTaskStore(self.writer, name)
        self.listener = Listener(self.engine.url, check_interval=0.5)
        self.events = PgTaskEventStream(
            self.engine, self.listener, catch_up_interval=catch_up_interval
        )

    async def start(self) -> None:
        await self.tasks.start()
        await self.events.start()
        await self.listener.start()

    async def aclose(self) -> None:
        await self.tasks.aclose()
        await self.listener.aclose()
        await self.writer.aclose()
        await self.engine.dispose()


@pytest.fixture
async def replicas(pg_engine: AsyncEngine, pg_url: str) -> AsyncIterator[tuple[Replica, Replica]]:
    a, b = Replica(pg_url, "a"), Replica(pg_url, "b")
    await a.start()
    await b.start()
    yield a, b
    await a.aclose()
    await b.aclose()


def _task(task_id: str, state: TaskState = TaskState.TASK_STATE_WORKING) -> Task:
    return Task(id=task_id, context_id="ctx", status=TaskStatus(state=state))


def _status(task_id: str, state: TaskState) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id=task_id, context_id="ctx", status=TaskStatus(state=state))


def _chunk(task_id: str, text_: str) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id="ctx",
        artifact=Artifact(artifact_id="answer", parts=[Part(text=text_)]),
        append=True,
    )


async def test_writes_are_compare_and_swap_across_replicas(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    v1 = await a.tasks.save(
        _task("t1"), event=None, prev=None, prev_version=TaskVersion.MISSING, context=CONTEXT
    )
    stored = await b.tasks.get("t1", CONTEXT)
    assert stored is not None
    assert stored.version == v1
    # A first write of an existing task loses.
    with pytest.raises(ConcurrentTaskModificationError):
        await b.tasks.save(
            _task("t1"), event=None, prev=None, prev_version=TaskVersion.MISSING, context=CONTEXT
        )
    # Both replicas write from version 1: one wins, the other is told.
    v2 = await a.tasks.save(_task("t1"), event=None, prev=None, prev_version=v1, context=CONTEXT)
    assert v2.is_after(v1)
    with pytest.raises(ConcurrentTaskModificationError):
        await b.tasks.save(_task("t1"), event=None, prev=None, prev_version=v1, context=CONTEXT)
    # A cancel overwrites a task under way whatever its version, not a finished one.
    canceled = _task("t1", TaskState.TASK_STATE_CANCELED)
    v3 = await b.tasks.save(canceled, event=None, prev=None, prev_version=v1, context=CONTEXT)
    assert v3.is_after(v2)
    # The replica running it cancels too when it hears: that is the cancel already written.
    again = await a.tasks.save(canceled, event=None, prev=None, prev_version=v2, context=CONTEXT)
    assert again == v3
    completed = _task("t9", TaskState.TASK_STATE_COMPLETED)
    await a.tasks.save(
        completed, event=None, prev=None, prev_version=TaskVersion.MISSING, context=CONTEXT
    )
    with pytest.raises(ConcurrentTaskModificationError):
        await b.tasks.save(
            _task("t9", TaskState.TASK_STATE_CANCELED),
            event=None,
            prev=None,
            prev_version=TaskVersion.MISSING,
            context=CONTEXT,
        )
    # Another persona's endpoint does not find it.
    other = ServerCallContext(state={PERSONA_STATE_KEY: "plato"})
    assert await b.tasks.get("t1", other) is None


@pytest.fixture
async def woken_only(pg_engine: AsyncEngine, pg_url: str) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two replicas whose subscribers catch up only once an hour: an event that reaches
    one within a test came by notification."""
    a, b = Replica(pg_url, "a"), Replica(pg_url, "b", catch_up_interval=3600)
    await a.start()
    await b.start()
    yield a, b
    await a.aclose()
    await b.aclose()


async def test_a_subscriber_elsewhere_gets_every_later_event_once_in_order(
    woken_only: tuple[Replica, Replica],
) -> None:
    a, b = woken_only
    version = await a.tasks.save(
        _task("t2"), event=_task("t2"), prev=None, prev_version=TaskVersion.MISSING, context=CONTEXT
    )
    for word in ("one ", "two "):  # before the subscription: in the snapshot, not the stream
        version = await a.tasks.save(
            _task("t2"), event=_chunk("t2", word), prev=None, prev_version=version, context=CONTEXT
        )
    snapshot = await b.tasks.get("t2", CONTEXT)
    assert snapshot is not None
    received: list[VersionedEvent] = []

    async def follow() -> None:
        async with aclosing(b.events.subscribe("t2", after=snapshot.version)) as events:
            async for event in events:
                received.append(event)
                if isinstance(event.event, TaskStatusUpdateEvent):
                    return

    follower = asyncio.create_task(follow())
    async with asyncio.timeout(WAIT):
        while not b.events.subscriptions:  # noqa: ASYNC110 (no event says it subscribed)
            await asyncio.sleep(0.01)
    for word in ("three ", "four "):
        version = await a.tasks.save(
            _task("t2"), event=_chunk("t2", word), prev=None, prev_version=version, context=CONTEXT
        )
    done = _task("t2", TaskState.TASK_STATE_COMPLETED)
    await a.tasks.save(
        done,
        event=_status("t2", TaskState.TASK_STATE_COMPLETED),
        prev=None,
        prev_version=version,
        context=CONTEXT,
    )
    async with asyncio.timeout(WAIT):
        await follower
    texts = [e.event.artifact.parts[0].text for e in received[:-1]]  # type: ignore[union-attr]
    assert texts == ["three ", "four "]
    assert received[-1].event.status.state == TaskState.TASK_STATE_COMPLETED  # type: ignore[union-attr]
    assert all(
        later.version.is_after(earlier.version) for earlier, later in itertools.pairwise(received)
    )
    # Woken by notifications: the catch-up timer would have waited an hour.


async def test_a_missed_notification_delays_an_event_but_loses_none(
    pg_engine: AsyncEngine, pg_url: str
) -> None:
    a = Replica(pg_url, "a")
    b = Replica(pg_url, "b")
    b.events = PgTaskEventStream(b.engine, b.listener, catch_up_interval=0.3)
    await a.start()
    await b.start()
    try:
        version = await a.tasks.save(
            _task("t3"),
            event=_task("t3"),
            prev=None,
            prev_version=TaskVersion.MISSING,
            context=CONTEXT,
        )
        await b.listener.aclose()  # no notification reaches b any more
        subscription = b.events.subscribe("t3", after=version)
        await a.tasks.save(
            _task("t3"),
            event=_chunk("t3", "late"),
            prev=None,
            prev_version=version,
            context=CONTEXT,
        )
        async with asyncio.timeout(WAIT):
            event = await anext(subscription)
        await subscription.aclose()
        assert event.event.artifact.parts[0].text == "late"  # type: ignore[union-attr]
    finally:
        await a.aclose()
        await b.aclose()


async def test_the_listener_reconnects_and_catches_up(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    version = await a.tasks.save(
        _task("t4"), event=_task("t4"), prev=None, prev_version=TaskVersion.MISSING, context=CONTEXT
    )
    subscription = b.events.subscribe("t4", after=version)
    first = asyncio.ensure_future(anext(subscription))
    async with asyncio.timeout(WAIT):
        while not b.events.subscriptions:  # noqa: ASYNC110 (no event says it subscribed)
            await asyncio.sleep(0.01)
    # PostgreSQL ends the replicas' listening connections (found by their application
    # name, and nothing else: pooled connections cut too were left unclosed, and their
    # warnings surfaced in later tests), as a restart or a network cut would.
    async with a.engine.connect() as conn:
        await conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = :name"
            ),
            {"name": LISTENER_NAME},
        )
    await a.tasks.save(
        _task("t4"), event=_chunk("t4", "after"), prev=None, prev_version=version, context=CONTEXT
    )
    async with asyncio.timeout(WAIT):
        event = await first
    await subscription.aclose()
    assert event.event.artifact.parts[0].text == "after"  # type: ignore[union-attr]
    assert b.listener.reconnections == 1  # it was cut, and came back


async def test_a_lost_replicas_tasks_fail_and_only_those(
    replicas: tuple[Replica, Replica], pg_engine: AsyncEngine
) -> None:
    a, b = replicas
    lease_a = ReplicaLease(a.engine, a.tasks, lease_seconds=1.0)
    lease_b = ReplicaLease(b.engine, b.tasks, lease_seconds=1.0)
    await lease_a.start()
    await lease_b.start()
    try:
        for store, task_id in ((a.tasks, "of-a"), (b.tasks, "of-b")):
            await store.save(
                _task(task_id),
                event=None,
                prev=None,
                prev_version=TaskVersion.MISSING,
                context=CONTEXT,
            )
        # b stops renewing (it "died"): its lease is a second old.
        await lease_b.aclose()
        async with pg_engine.begin() as conn:
            await conn.execute(insert(replicas_table).values(id="b"))
            await conn.execute(
                update(replicas_table)
                .where(replicas_table.c.id == "b")
                .values(heartbeat_at=text("now() - interval '5 seconds'"))
            )
        subscription = a.events.subscribe("of-b", after=TaskVersion(1))
        assert await lease_a.sweep() == 1
        lost = await a.tasks.get("of-b", CONTEXT)
        assert lost is not None
        assert lost.task.status.state == TaskState.TASK_STATE_FAILED
        assert REPLICA_LOST in lost.task.status.message.parts[0].text
        alive = await a.tasks.get("of-a", CONTEXT)
        assert alive is not None
        assert alive.task.status.state == TaskState.TASK_STATE_WORKING
        # A subscriber hears of the failure.
        async with asyncio.timeout(WAIT):
            event = await anext(subscription)
        await subscription.aclose()
        assert event.event.status.state == TaskState.TASK_STATE_FAILED  # type: ignore[union-attr]
        # Sweeping again (another replica) fails nothing twice.
        assert await lease_a.sweep() == 0
        async with pg_engine.connect() as conn:
            rows = (await conn.execute(select(replicas_table.c.id))).all()
        assert [r.id for r in rows] == ["a"]
    finally:
        await lease_a.aclose()
    async with pg_engine.connect() as conn:
        assert (await conn.execute(select(replicas_table.c.id))).all() == []  # given up


async def test_advisory_locks_keep_turns_apart_across_replicas(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    locks_a, locks_b = AdvisoryLocks(a.engine.url), AdvisoryLocks(b.engine.url)
    order: list[str] = []

    async def turn(
        locks: AdvisoryLocks, key: str, name: str, together: asyncio.Barrier | None = None
    ) -> None:
        async with locks.hold(key):
            order.append(f"{name} in")
            if together is None:
                await asyncio.sleep(0.3)  # a moment for the other turn to break in
            else:  # all the turns in at once, or none leaves (the lock kept one out)
                async with asyncio.timeout(WAIT):
                    await together.wait()
            order.append(f"{name} out")

    await asyncio.gather(turn(locks_a, "ctx-1", "a"), turn(locks_b, "ctx-1", "b"))
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
    # Other conversations run side by side.
    order.clear()
    both = asyncio.Barrier(2)
    await asyncio.gather(turn(locks_a, "ctx-2", "a", both), turn(locks_b, "ctx-3", "b", both))
    assert order[:2] == ["a in", "b in"] or order[:2] == ["b in", "a in"]
    # Many at once on one replica: one session holds them all, no pooled connection.
    order.clear()
    every = asyncio.Barrier(40)
    await asyncio.gather(*(turn(locks_a, f"many-{n}", str(n), every) for n in range(40)))
    assert all(entry.endswith("in") for entry in order[:40])
    await locks_a.aclose()
    await locks_b.aclose()


async def test_a_turn_canceled_while_waiting_for_the_lock_leaves_no_lock(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    locks_a, locks_b = AdvisoryLocks(a.engine.url), AdvisoryLocks(b.engine.url)
    async with locks_a.hold("ctx"):
        waiting = asyncio.create_task(locks_b.hold("ctx").__aenter__())
        # Until PostgreSQL shows b's session, besides a's, has tried for the lock (each
        # look in a transaction of its own: one sees one snapshot of pg_stat_activity).
        tried = text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'SELECT pg_try_advisory_lock%'"
        )
        async with asyncio.timeout(WAIT), a.engine.connect() as conn:
            while await conn.scalar(tried) < 2:
                await conn.rollback()
                await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    async with asyncio.timeout(WAIT), locks_b.hold("ctx"):
        pass
    await locks_a.aclose()
    await locks_b.aclose()
