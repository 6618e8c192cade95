"""Tasks shared by replicas: the SDK's ``VersionedTaskStore`` on PostgreSQL.

Every write of a task is a compare-and-swap on its ``version`` column (the SDK's
``TaskVersion``): two replicas can never both advance one task, and a replica whose
task was canceled elsewhere finds out at its next write. The event that produced
the write goes into ``pa_task_events`` in the same transaction, with the new
version, and ``pg_notify`` tells every replica; subscribers on other replicas read
events by version from there (:class:`~persona_agent.cluster.events.PgTaskEventStream`),
so nothing is lost between a task snapshot and the live stream.

Each write also records the replica that made it: the lease of that replica
covers the task (:mod:`persona_agent.cluster.leases`).

Unlike the single-node :class:`~persona_agent.a2a.task_store.SqlTaskStore`, every
streamed chunk is committed before the next one (a subscriber elsewhere must be
able to read it); list, delete and forgetting a persona are the same queries, so
they are that store's.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from a2a.helpers.proto_helpers import new_text_message
from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    StoredTask,
    TaskVersion,
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.proto_utils import to_stream_response
from sqlalchemy import bindparam, delete, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from persona_agent.a2a.keys import TERMINAL_STATES
from persona_agent.a2a.task_store import SqlTaskStore, persona_owner, sort_timestamp
from persona_agent.cluster.notify import NOTIFY
from persona_agent.db import GroupCommitWriter, replicas_table, task_events_table, tasks_table

__all__ = [
    "CANCEL_CHANNEL",
    "EVENTS_CHANNEL",
    "REPLICA_LOST",
    "ClusterTaskStore",
]

logger = logging.getLogger(__name__)

EVENTS_CHANNEL = "pa_task_events"
"""Notified with a task id after each event of that task is committed."""

CANCEL_CHANNEL = "pa_task_cancel"
"""Notified with a task id when a task is canceled: the replica running it stops."""

REPLICA_LOST = (
    "The replica answering this task stopped (replica lost) before it finished; "
    "send the message again."
)

_RUNNING = (int(TaskState.TASK_STATE_SUBMITTED), int(TaskState.TASK_STATE_WORKING))
_TERMINAL = frozenset(int(state) for state in TERMINAL_STATES)


class ClusterTaskStore(VersionedTaskStore):
    """Tasks in ``pa_tasks`` with versions, events in ``pa_task_events``, for replicas.

    ``replica`` is this replica's id, recorded with each write.
    """

    def __init__(self, writer: GroupCommitWriter, replica: str) -> None:
        self._engine = self.engine = writer.engine
        self.replica = replica
        self._tasks = SqlTaskStore(writer)  # list, delete, forget_persona: the same queries
        t = tasks_table.c
        first = pg_insert(tasks_table)
        self._first = first.on_conflict_do_update(
            index_elements=["owner", "id"],
            # A task written before versions existed (0) is taken over; any other is not new.
            set_={
                **{k: first.excluded[k] for k in ("context_id", "state", "sort_ts", "data")},
                "version": 1,
                "replica": first.excluded.replica,
            },
            where=t.version == 0,
        ).returning(t.version)
        self._next = (
            update(tasks_table)
            .where(
                t.owner == bindparam("w_owner"),
                t.id == bindparam("w_id"),
                t.version == bindparam("w_prev"),
            )
            .returning(t.version)
        )
        self._lock = (
            select(t.state, t.version)
            .where(t.owner == bindparam("w_owner"), t.id == bindparam("w_id"))
            .with_for_update()
        )
        self._select = select(t.data, t.version).where(
            t.owner == bindparam("s_owner"), t.id == bindparam("s_id")
        )
        self._event = insert(task_events_table)

    @property
    def as_task_store(self) -> SqlTaskStore:
        return self._tasks

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        del prev
        owner = persona_owner(context)
        async with self._engine.begin() as conn:
            version = await self._write(conn, owner, task, prev_version)
            if event is not None:
                await conn.execute(
                    self._event,
                    {
                        "task_id": task.id,
                        "version": version,
                        "data": to_stream_response(event).SerializeToString(),
                    },
                )
                await conn.execute(NOTIFY, {"channel": EVENTS_CHANNEL, "payload": task.id})
            if task.status.state == TaskState.TASK_STATE_CANCELED:
                await conn.execute(NOTIFY, {"channel": CANCEL_CHANNEL, "payload": task.id})
        return TaskVersion(version)

    async def _write(
        self, conn: AsyncConnection, owner: str, task: Task, prev_version: TaskVersion
    ) -> int:
        """The compare-and-swap; the task's new version."""
        values: dict[str, Any] = {
            "context_id": task.context_id,
            "state": int(task.status.state),
            "sort_ts": sort_timestamp(task),
            "data": task.SerializeToString(),
            "replica": self.replica,
        }
        key = {"w_owner": owner, "w_id": task.id}
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            # The SDK's rule: a cancel overwrites any task still under way, whatever its
            # version, and fails on a task that is finished or absent.
            stored = (await conn.execute(self._lock, key)).first()
            if stored is None or stored.state in _TERMINAL:
                raise ConcurrentTaskModificationError(task.id)
            prev = int(stored.version)
        elif prev_version.is_missing:
            row = (
                await conn.execute(
                    self._first, {"owner": owner, "id": task.id, "version": 1, **values}
                )
            ).first()
            if row is None:
                raise ConcurrentTaskModificationError(task.id)
            return int(row.version)
        else:
            prev = _as_int(prev_version)
        row = (
            await conn.execute(self._next, {**key, "w_prev": prev, "version": prev + 1, **values})
        ).first()
        if row is None:
            raise ConcurrentTaskModificationError(task.id)
        return int(row.version)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    self._select, {"s_owner": persona_owner(context), "s_id": task_id}
                )
            ).first()
        if row is None:
            return None
        task = Task()
        task.ParseFromString(row.data)
        return StoredTask(task, TaskVersion(int(row.version)))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self._tasks.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._tasks.delete(task_id, context)
        async with self._engine.begin() as conn:
            await conn.execute(
                delete(task_events_table).where(task_events_table.c.task_id == task_id)
            )

    async def forget_persona(self, persona_id: str) -> None:
        await self._tasks.forget_persona(persona_id)

    async def aclose(self) -> None:
        await self._tasks.aclose()

    async def fail_orphans(self, reason: str = REPLICA_LOST) -> int:
        """End ``failed`` every task under way whose replica holds no lease (it died, or
        stopped before it could finish them); returns how many. Tasks of live replicas
        are never touched; two replicas doing this at once fail each task once."""
        t = tasks_table.c
        live = select(replicas_table.c.id)
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(t.owner, t.id, t.data, t.version).where(
                        t.state.in_(_RUNNING), or_(t.replica.is_(None), t.replica.not_in(live))
                    )
                )
            ).all()
        failed = 0
        for owner, _task_id, data, version in rows:
            task = Task()
            task.ParseFromString(data)
            task.status.state = TaskState.TASK_STATE_FAILED
            task.status.message.CopyFrom(new_text_message(reason))
            task.status.timestamp.GetCurrentTime()
            event = TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=task.status
            )
            try:
                async with self._engine.begin() as conn:
                    await self._write(conn, owner, task, TaskVersion(int(version)))
                    written = int(version) + 1
                    await conn.execute(
                        self._event,
                        {
                            "task_id": task.id,
                            "version": written,
                            "data": to_stream_response(event).SerializeToString(),
                        },
                    )
                    await conn.execute(NOTIFY, {"channel": EVENTS_CHANNEL, "payload": task.id})
            except ConcurrentTaskModificationError:
                continue  # another replica wrote it meanwhile (it failed it, or it moved on)
            failed += 1
        return failed

    async def forget_events(self, older_than_seconds: float) -> None:
        """Delete events older than this: subscribers read them within moments, and a
        late subscriber starts from the task's snapshot."""
        cutoff = func.now() - timedelta(seconds=older_than_seconds)
        async with self._engine.begin() as conn:
            await conn.execute(
                delete(task_events_table).where(task_events_table.c.created_at < cutoff)
            )


def _as_int(version: TaskVersion) -> int:
    value = version._value  # the SDK offers no accessor
    if not isinstance(value, int):
        raise TypeError(f"not a version of this store: {version!r}")
    return value
