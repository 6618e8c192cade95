"""Tasks shared by replicas: the SDK's ``VersionedTaskStore`` on PostgreSQL.

Every write of a task is a compare-and-swap on its ``version`` column (the SDK's
``TaskVersion``): two replicas can never both advance one task, and a replica whose
task was canceled elsewhere finds out at its next write. The event that produced
the write goes into ``pa_task_events`` in the same transaction, with the new
version, and ``pg_notify`` tells every replica; subscribers on other replicas read
events by version from there (:class:`~persona_agent.cluster.task_events.PgTaskEventStream`),
so nothing is lost between a task snapshot and the live stream.

Each write also records the replica that made it: the lease of that replica
covers the task (:mod:`persona_agent.cluster.leases`).

Unlike the single-node :class:`~persona_agent.a2a.tasks.task_store.SqlTaskStore`, every
streamed chunk is committed before the next one (a subscriber elsewhere must be
able to read it); list, delete and forgetting a persona are the same queries, so
they are that store's.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

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
from opentelemetry.trace import SpanKind
from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    LargeBinary,
    String,
    Table,
    delete,
    func,
    or_,
    select,
)

from persona_agent.a2a.context_keys import TERMINAL_STATES
from persona_agent.a2a.tasks.task_store import SqlTaskStore, persona_owner, sort_timestamp
from persona_agent.cluster.notify import asyncpg_dsn
from persona_agent.db import SEQ, GroupCommitWriter, metadata, tasks_table
from persona_agent.observe.tracing import TRACER

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]

__all__ = [
    "CANCEL_CHANNEL",
    "EVENTS_CHANNEL",
    "REPLICA_LOST",
    "ClusterTaskStore",
    "replicas_table",
    "task_events_table",
]

logger = logging.getLogger(__name__)

task_events_table = Table(
    "pa_task_events",
    metadata,
    Column("seq", SEQ, primary_key=True, autoincrement=True),
    Column("task_id", String(200), nullable=False),
    Column("version", BigInteger, nullable=False),  # the task's version after this event
    Column("data", LargeBinary, nullable=False),  # a StreamResponse, serialized protobuf
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_pa_task_events_task", "task_id", "version"),
)
"""Each event of a task, in order, for subscribers on other replicas
(:mod:`persona_agent.cluster.task_events`)."""

replicas_table = Table(
    "pa_replicas",
    metadata,
    Column("id", String(100), primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
"""One row per live replica, its lease renewed by heartbeats
(:mod:`persona_agent.cluster.leases`)."""

EVENTS_CHANNEL = "pa_task_events"
"""Notified with a task id after each event of that task is committed."""

CANCEL_CHANNEL = "pa_task_cancel"
"""Notified with a task id when a task is canceled: the replica running it stops."""

REPLICA_LOST = (
    "The replica answering this task stopped (replica lost) before it finished; "
    "send the message again."
)

_ABSENT_KEPT = 10_000

_RUNNING = (int(TaskState.TASK_STATE_SUBMITTED), int(TaskState.TASK_STATE_WORKING))
_TERMINAL = frozenset(int(state) for state in TERMINAL_STATES)
_CANCELED = int(TaskState.TASK_STATE_CANCELED)


_SAVED_THEN = f"""
event AS (
    INSERT INTO {task_events_table.name} (task_id, version, data)
    SELECT id, version, CAST(:event AS bytea) FROM saved WHERE CAST(:event AS bytea) IS NOT NULL
    RETURNING task_id),
told AS (SELECT pg_notify('{EVENTS_CHANNEL}', task_id) FROM event),
canceled AS (SELECT pg_notify('{CANCEL_CHANNEL}', id) FROM saved WHERE :state = {_CANCELED})
SELECT version, (SELECT count(*) FROM told), (SELECT count(*) FROM canceled) FROM saved"""
"""After the CTE ``saved`` (the task written, or no row): its event, if any, and the
notifications, all in the one statement (one round trip, one implicit transaction)."""

_COLUMNS = ("context_id", "state", "sort_ts", "data", "replica")
_VALUES = ", ".join(f"{c} = :{c}" for c in _COLUMNS)

_FIRST = f"""WITH saved AS (
    INSERT INTO {tasks_table.name} AS t
        (owner, id, context_id, state, sort_ts, data, replica, version)
    VALUES (:owner, :id, :context_id, :state, :sort_ts, :data, :replica, 1)
    ON CONFLICT (owner, id) DO UPDATE SET {", ".join(f"{c} = excluded.{c}" for c in _COLUMNS)},
        version = 1
    WHERE t.version = 0
    RETURNING t.id, t.version),{_SAVED_THEN}"""
"""A task's first write; a task written before versions existed (0) is taken over, any
other means the task is not new: no row."""

_NEXT = f"""WITH saved AS (
    UPDATE {tasks_table.name} SET {_VALUES}, version = version + 1
    WHERE owner = :owner AND id = :id AND version = :prev
    RETURNING id, version),{_SAVED_THEN}"""
"""A later write, from the version the writer read: no row if another came between."""

_CANCEL = f"""WITH saved AS (
    UPDATE {tasks_table.name} SET {_VALUES}, version = version + 1
    WHERE owner = :owner AND id = :id AND state NOT IN ({", ".join(map(str, sorted(_TERMINAL)))})
    RETURNING id, version),{_SAVED_THEN}"""
"""The SDK's rule for a cancel: it overwrites a task still under way whatever its version;
no row for a task finished or absent."""


_PARAMETERS = ("owner", "id", "context_id", "state", "sort_ts", "data", "replica", "event", "prev")


def _positional(sql: str) -> str:
    """``sql`` with asyncpg's ``$n`` for each ``:name`` (numbered as :data:`_PARAMETERS`)."""
    return re.sub(r":([a-z_]+)", lambda m: f"${_PARAMETERS.index(m.group(1)) + 1}", sql)


class ClusterTaskStore(VersionedTaskStore):
    """Tasks in ``pa_tasks`` with versions, events in ``pa_task_events``, for replicas.

    ``replica`` is this replica's id, recorded with each write. Each write is one
    statement on its own: the compare-and-swap, the event and the notifications in one
    round trip and one implicit transaction. Call :meth:`start` first.
    """

    def __init__(self, writer: GroupCommitWriter, replica: str, *, pool_size: int = 10) -> None:
        self.engine = writer.engine
        self.replica = replica
        self._tasks = SqlTaskStore(writer)  # list, delete, forget_persona: the same queries
        self._dsn = asyncpg_dsn(writer.engine.url)
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._first, self._next, self._cancel = map(_positional, (_FIRST, _NEXT, _CANCEL))
        self._select = f"SELECT data, version FROM {tasks_table.name} WHERE owner = $1 AND id = $2"
        self._absent: OrderedDict[tuple[str, str], None] = OrderedDict()
        """Tasks a read found absent (the oldest forgotten first). The SDK reads a new
        task several times before its first write; task ids are the server's own (UUIDs),
        so no other replica can create a task this one found absent."""
        self._writes = 0

    async def start(self) -> None:
        """Open the store's connections (an asyncpg pool of its own: the task of every
        message is read and written several times, and asyncpg's prepared statements
        cost a fraction of a general-purpose layer's work per call)."""
        import asyncpg

        self._pool = await asyncpg.create_pool(
            self._dsn, min_size=1, max_size=self._pool_size, command_timeout=60
        )

    def _connection(self) -> Any:
        if self._pool is None:
            raise RuntimeError("ClusterTaskStore.start() was not called")
        return self._pool.acquire()

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
        data = to_stream_response(event).SerializeToString() if event is not None else None
        return TaskVersion(await self._write(persona_owner(context), task, prev_version, data))

    async def _write(
        self, owner: str, task: Task, prev_version: TaskVersion, event: bytes | None
    ) -> int:
        """The compare-and-swap with its event; the task's new version.

        Raises:
            ConcurrentTaskModificationError: another write came first (or, for a cancel,
                the task is finished or absent).
        """
        values: list[Any] = [
            owner,
            task.id,
            task.context_id,
            int(task.status.state),
            sort_timestamp(task),
            task.SerializeToString(),
            self.replica,
            event,
        ]
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            statement = self._cancel
        elif prev_version.is_missing:
            statement = self._first
        else:
            statement = self._next
            values.append(_as_int(prev_version))
        self._writes += 1
        self._absent.pop((owner, task.id), None)
        with TRACER.start_as_current_span("db write", kind=SpanKind.CLIENT) as span:
            if span.is_recording():
                span.update_name("UPSERT pa_tasks")
                span.set_attributes(
                    {
                        "db.system.name": "postgresql",
                        "db.operation.name": "UPSERT",
                        "db.collection.name": "pa_tasks",
                    }
                )
            async with self._connection() as conn:
                row = await conn.fetchrow(statement, *values)
                if row is None and task.status.state == TaskState.TASK_STATE_CANCELED:
                    row = await self._canceled_already(conn, owner, task.id)
        if row is None:
            raise ConcurrentTaskModificationError(task.id)
        return int(row[0])

    async def _canceled_already(self, conn: Any, owner: str, task_id: str) -> Any:
        """A cancel of a task another replica canceled first is that cancel, not a
        conflict: the task's version, with nothing written, or ``None``.

        The replica running the task writes its own cancel status when it hears of the
        other's (:meth:`~persona_agent.a2a.tasks.lifecycle.TaskExecutor.canceled_elsewhere`).
        Taken as a conflict, the SDK would reload the task and hand its subscribers the
        whole task as a last event after their first: a v0.3 client refuses a second task
        ("Task is already set"). Taken as done, they get the cancel status, marked final.
        """
        row = await conn.fetchrow(
            f"SELECT version FROM {tasks_table.name} WHERE owner = $1 AND id = $2 AND state = $3",
            owner,
            task_id,
            _CANCELED,
        )
        return row

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        key = (persona_owner(context), task_id)
        if key in self._absent:
            return None
        writes = self._writes
        async with self._connection() as conn:
            row = await conn.fetchrow(self._select, *key)
        if row is None:
            if writes == self._writes:  # no write of this replica raced the read
                self._absent[key] = None
                if len(self._absent) > _ABSENT_KEPT:
                    self._absent.popitem(last=False)
            return None
        task = Task()
        task.ParseFromString(row["data"])
        return StoredTask(task, TaskVersion(int(row["version"])))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self._tasks.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._tasks.delete(task_id, context)
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(task_events_table).where(task_events_table.c.task_id == task_id)
            )

    async def forget_persona(self, persona_id: str) -> None:
        await self._tasks.forget_persona(persona_id)

    async def aclose(self) -> None:
        await self._tasks.aclose()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def fail_orphans(self, reason: str = REPLICA_LOST) -> int:
        """End ``failed`` every task under way whose replica holds no lease (it died, or
        stopped before it could finish them); returns how many. Tasks of live replicas
        are never touched; two replicas doing this at once fail each task once."""
        t = tasks_table.c
        live = select(replicas_table.c.id)
        async with self.engine.connect() as conn:
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
                await self._write(
                    owner,
                    task,
                    TaskVersion(int(version)),
                    to_stream_response(event).SerializeToString(),
                )
            except ConcurrentTaskModificationError:
                continue  # another replica wrote it meanwhile (it failed it, or it moved on)
            failed += 1
        return failed

    async def forget_events(self, older_than_seconds: float) -> None:
        """Delete events older than this: subscribers read them within moments, and a
        late subscriber starts from the task's snapshot."""
        cutoff = func.now() - timedelta(seconds=older_than_seconds)
        async with self.engine.begin() as conn:
            await conn.execute(
                delete(task_events_table).where(task_events_table.c.created_at < cutoff)
            )


def _as_int(version: TaskVersion) -> int:
    value = version._value  # the SDK offers no accessor
    if not isinstance(value, int):
        raise TypeError(f"not a version of this store: {version!r}")
    return value
