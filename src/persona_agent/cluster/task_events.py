"""Task events across replicas: the SDK's ``TaskEventStream`` on ``LISTEN``/``NOTIFY``.

The replica running a task writes each event to ``pa_task_events`` with the task's
new version, in the transaction that saves the task, and notifies
:data:`~persona_agent.cluster.tasks.EVENTS_CHANNEL` with the task id
(:class:`~persona_agent.cluster.tasks.ClusterTaskStore`). A subscriber on another
replica reads the events after the version it has, in version order, whenever a
notification for its task arrives, after the listening connection reconnects, and
at the latest every ``catch_up_interval`` seconds: a missed notification delays an
event, never loses it, and no event comes twice.

(The SDK's ``DatabaseTaskEventStream`` polls every half second instead:
docs/performance.md compares the two.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

from a2a.server.cluster import TaskEventStream, TaskVersion, VersionedEvent
from a2a.server.cluster.database_event_stream import stream_response_to_event
from a2a.types.a2a_pb2 import StreamResponse
from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.cluster.notify import Listener
from persona_agent.cluster.tasks import EVENTS_CHANNEL, task_events_table

__all__ = ["PgTaskEventStream"]


class PgTaskEventStream(TaskEventStream):
    """Subscriptions to the events other replicas write, woken by notifications."""

    def __init__(
        self, engine: AsyncEngine, listener: Listener, *, catch_up_interval: float = 1.0
    ) -> None:
        self._engine = engine
        self._listener = listener
        self._catch_up_interval = catch_up_interval
        self._waiting: dict[str, set[asyncio.Event]] = {}
        e = task_events_table.c
        self._after = (
            select(e.version, e.data)
            .where(e.task_id == bindparam("task_id"), e.version > bindparam("after"))
            .order_by(e.version)
        )

    async def start(self) -> None:
        """Listen (call once, before the listener starts or after)."""
        await self._listener.listen(EVENTS_CHANNEL, self._wake)
        self._listener.on_reconnect(self._wake_all)

    @property
    def subscriptions(self) -> int:
        return sum(len(waiters) for waiters in self._waiting.values())

    def _wake(self, task_id: str) -> None:
        for waiter in self._waiting.get(task_id, ()):
            waiter.set()

    async def _wake_all(self) -> None:
        for waiters in self._waiting.values():
            for waiter in waiters:
                waiter.set()

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Nothing to do: the task store wrote and announced the event with the task."""
        del task_id, event

    async def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        """The events of ``task_id`` after version ``after``, as they are written."""
        value = after._value  # the SDK offers no accessor
        cursor = 0 if after.is_missing or not isinstance(value, int) else value
        waiter = asyncio.Event()
        self._waiting.setdefault(task_id, set()).add(waiter)
        try:
            while True:
                waiter.clear()  # before the read: a notification during it reads again
                async with self._engine.connect() as conn:
                    rows = (
                        await conn.execute(self._after, {"task_id": task_id, "after": cursor})
                    ).all()
                for version, data in rows:
                    cursor = int(version)
                    response = StreamResponse()
                    response.ParseFromString(data)
                    yield VersionedEvent(stream_response_to_event(response), TaskVersion(cursor))
                if not rows:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(waiter.wait(), self._catch_up_interval)
        finally:
            waiters = self._waiting.get(task_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiting[task_id]

    async def destroy(self, task_id: str) -> None:
        """Nothing to do: subscribers stop at the terminal event; old events are swept
        (:meth:`~persona_agent.cluster.tasks.ClusterTaskStore.forget_events`)."""
        del task_id
