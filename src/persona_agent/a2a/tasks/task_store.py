"""A lean durable task store behind the SDK's ``TaskStore`` interface.

One row per task: the serialized protobuf plus the columns ListTasks filters
and orders on, written with one upsert per save. (The SDK's
``DatabaseTaskStore`` does a SELECT and an UPDATE per event and re-serializes
every artifact as JSON: DESIGN.md measured it at 0.13x a bare agent.)

Tasks are owned by ``{persona_id}:{user}`` (see :func:`persona_owner`), so a
task of one persona is never found through another persona's endpoint.

Writes are batched. A task's first save and every save that settles it
(terminal, or waiting for input) return once committed (before the SDK sends
the answer), in the group commit with every other write under way
(:class:`~persona_agent.db.GroupCommitWriter`); the saves in between
(``working``, each streamed chunk) only replace the task's uncommitted copy, and
a flush writes them all at most ``flush_delay`` seconds later. A blocking send's
first save waits for the flush too: its client sees nothing before the task
settles, so a task answered within ``flush_delay`` is written once. Reads see
uncommitted copies, and ``list`` flushes first, so no client can tell, except
after a crash, which the next start-up turns into ``failed`` for every task
left unfinished anyway (a blocking send's client, whose call broke off, never
learnt the id of a task that was not written).

A new task's id is made here (:class:`NewTaskIds`): reads of it before its first
save are answered from memory, not from the table, where it cannot be.

What the store knows of tasks besides the table is one bounded map, described on
:class:`SqlTaskStore`.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections import OrderedDict
from typing import Any

from a2a.helpers.proto_helpers import new_text_message
from a2a.server.context import ServerCallContext
from a2a.server.id_generator import IDGenerator, IDGeneratorContext
from a2a.server.tasks.task_store import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import (
    ListTasksCursor,
    decode_list_tasks_cursor,
    encode_list_tasks_cursor,
)

from persona_agent.a2a.context_keys import (
    PERSONA_STATE_KEY,
    TERMINAL_STATES,
    WHOLE_ANSWER_STATE_KEY,
)
from persona_agent.db import GroupCommitWriter, Sql, in_list, like_escaped

logger = logging.getLogger(__name__)

__all__ = ["NewTaskIds", "SqlTaskStore", "persona_owner", "sort_timestamp"]


_SETTLED = (
    *TERMINAL_STATES,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
)
"""States a call ends in (terminal, or waiting for the client): written at once, since the
answer that reports them goes out next."""


_Key = tuple[str, str]
"""(owner, task id)."""

_TASKS = "pa_tasks"
"""The table (:data:`persona_agent.db.task_tables.tasks_table`), named in the statements;
each statement is made once, here (``:name`` parameters, the same text on both databases)."""

_UPSERT = Sql(
    f"INSERT INTO {_TASKS} (owner, id, context_id, state, sort_ts, data) "
    "VALUES (:owner, :id, :context_id, :state, :sort_ts, :data) "
    "ON CONFLICT (owner, id) DO UPDATE SET context_id = excluded.context_id, "
    "state = excluded.state, sort_ts = excluded.sort_ts, data = excluded.data",
    table=_TASKS,
)
_SELECT = Sql(f"SELECT data FROM {_TASKS} WHERE owner = :owner AND id = :id", table=_TASKS)
_DELETE = Sql(f"DELETE FROM {_TASKS} WHERE owner = :owner AND id = :id", table=_TASKS)
_DELETE_OWNER = Sql(f"DELETE FROM {_TASKS} WHERE owner = :owner", table=_TASKS)
_DELETE_LIKE = Sql(f"DELETE FROM {_TASKS} WHERE owner LIKE :prefix", table=_TASKS)
_OWNERS_LIKE = Sql(
    f"SELECT owner, count(*) FROM {_TASKS} WHERE owner LIKE :pattern ESCAPE '\\' GROUP BY owner",
    table=_TASKS,
)
_SETTLED_IN, _SETTLED_VALUES = in_list("settled", [int(state) for state in _SETTLED])
_UNFINISHED = Sql(
    f"SELECT owner, id, data FROM {_TASKS} WHERE state NOT IN {_SETTLED_IN}", table=_TASKS
)
"""Tasks neither terminal nor waiting for the client (with :data:`_SETTLED_VALUES`)."""
_FAIL = Sql(
    f"UPDATE {_TASKS} SET state = :state, sort_ts = :sort_ts, data = :data "
    "WHERE owner = :owner AND id = :id",
    table=_TASKS,
)


class _Known(enum.Enum):
    COMMITTED = "committed"
    """The task is under way (saved since it started or resumed) and its latest copy is in
    the table: its next save, unless it settles the task, can wait for the flush."""
    ABSENT = "absent"
    """A read found no such task. The SDK looks a new task up three times before its first
    save; only this store writes the table, so the task stays absent until saved here."""


class NewTaskIds(IDGenerator):
    """The SDK's new task ids (random UUIDs, as its own generator makes), each told to
    ``store`` as it is made (:meth:`SqlTaskStore.new_task`)."""

    def __init__(self, store: SqlTaskStore) -> None:
        self._store = store

    def generate(self, context: IDGeneratorContext) -> str:
        task_id = str(uuid.uuid4())
        self._store.new_task(task_id)
        return task_id


def persona_owner(context: ServerCallContext) -> str:
    """The owner of a task: the persona it was sent to and the calling user."""
    persona_id = context.state.get(PERSONA_STATE_KEY, "")
    return f"{persona_id}:{context.user.user_name}"


def sort_timestamp(task: Task) -> int:
    if task.HasField("status") and task.status.HasField("timestamp"):
        return int(task.status.timestamp.ToNanoseconds())
    return -1


class SqlTaskStore(TaskStore):
    """Tasks in one SQL table (SQLite or PostgreSQL), isolated per persona and user.

    Besides the table, the store keeps one map from task key to what it knows:
    an uncommitted copy of the task (waiting for the flush, or in its
    transaction: reads return it), :attr:`_Known.COMMITTED` or
    :attr:`_Known.ABSENT`. Copies are kept only until committed, and a task that
    settles leaves the map, so a task waiting for input for days holds nothing.
    The map holds at most ``max_known`` markers; beyond, the oldest go (a task
    whose marker went is written at once on its next save, or read once more).

    Call :meth:`aclose` at shutdown: it writes what is still pending.
    """

    def __init__(
        self, writer: GroupCommitWriter, *, flush_delay: float = 0.05, max_known: int = 10_000
    ) -> None:
        self._db = writer
        self._lists: dict[tuple[bool, bool, bool, bool], tuple[Sql, Sql]] = {}
        """ListTasks' statements (count, page) by the filters given, each made once."""
        self._flush_delay = flush_delay
        self._max_known = max_known
        self._known: OrderedDict[_Key, Task | _Known] = OrderedDict()
        self._unflushed: set[_Key] = set()
        """Keys whose copy in :attr:`_known` waits for the flush (not handed to the writer)."""
        self._changes = 0
        """Saves and deletes so far: a read that saw none during its query may mark absent."""
        self._flusher: asyncio.Task[None] | None = None
        self._new: OrderedDict[str, None] = OrderedDict()
        """Ids made by :class:`NewTaskIds` and not saved yet (at most ``max_known``)."""

    def new_task(self, task_id: str) -> None:
        """``task_id`` was just made for a new task (a random UUID): until its first save,
        no owner's read of it needs the table."""
        self._new[task_id] = None
        if len(self._new) > self._max_known:
            self._new.popitem(last=False)

    @property
    def known(self) -> int:
        """Entries of the map: uncommitted copies and markers."""
        return len(self._known)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        key = (persona_owner(context), task.id)
        self._changes += 1
        self._new.pop(task.id, None)
        settles = task.status.state in _SETTLED
        # Under way and committed already, or a blocking send's (whose client sees nothing
        # before the task settles): its copy waits for the flush.
        if not settles and (
            (key in self._known and self._known[key] is not _Known.ABSENT)
            or context.state.get(WHOLE_ANSWER_STATE_KEY)
        ):
            self._known[key] = task
            self._unflushed.add(key)
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.create_task(self._flush_later())
            return
        self._unflushed.discard(key)
        await self._write([(key, task)], settles=settles)

    async def flush(self) -> None:
        """Write every copy that waits for the flush, in one transaction."""
        keys, self._unflushed = self._unflushed, set()
        pending = [(key, task) for key in keys if isinstance(task := self._known.get(key), Task)]
        try:
            await self._write(pending, settles=False)
        except BaseException:
            for key, task in pending:  # write them next time, unless a newer copy came
                if self._known.get(key) is task:
                    self._unflushed.add(key)
            raise

    async def aclose(self) -> None:
        """Stop the timer and write what is pending."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
        await self.flush()

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._flush_delay)
        try:
            await self.flush()
        except Exception:  # the next save or flush tries again with newer copies
            logger.exception("Could not write %d pending task(s)", len(self._unflushed))

    async def _write(self, tasks: list[tuple[_Key, Task]], *, settles: bool) -> None:
        """Upsert ``tasks`` in the writer's next transaction; return once committed.

        Meanwhile reads see the copies; then a task still under way is marked
        committed, and a task that ``settles`` leaves the map.
        """
        if not tasks:
            return
        rows: list[dict[str, Any]] = []
        for key, task in tasks:
            self._known[key] = task
            rows.append(
                {
                    "owner": key[0],
                    "id": task.id,
                    "context_id": task.context_id,
                    "state": int(task.status.state),
                    "sort_ts": sort_timestamp(task),
                    "data": task.SerializeToString(),
                }
            )
        try:
            await self._db.write(_UPSERT, rows)
        finally:
            for key, task in tasks:
                if self._known.get(key) is task:  # no later save is on its way
                    if settles:
                        del self._known[key]
                    else:
                        self._known[key] = _Known.COMMITTED
            self._bound()

    def _bound(self) -> None:
        """Drop the oldest markers beyond ``max_known`` (copies stay until committed)."""
        excess = len(self._known) - self._max_known
        if excess <= 0:
            return
        for key in [key for key, value in self._known.items() if isinstance(value, _Known)]:
            del self._known[key]
            excess -= 1
            if excess <= 0:
                return

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        key = (persona_owner(context), task_id)
        known = self._known.get(key)
        if isinstance(known, Task):
            copy = Task()
            copy.CopyFrom(known)
            return copy
        if known is _Known.ABSENT or (known is None and task_id in self._new):
            return None
        changes = self._changes
        rows = await self._db.fetch(_SELECT, {"owner": key[0], "id": task_id})
        data = rows[0][0] if rows else None
        if data is None:
            if changes == self._changes and key not in self._known:
                self._known[key] = _Known.ABSENT
                self._bound()
            return None
        task = Task()
        task.ParseFromString(data)
        return task

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        if self._unflushed:
            await self.flush()
        values: dict[str, Any] = {"owner": persona_owner(context)}
        if params.context_id:
            values["context_id"] = params.context_id
        if params.status:
            values["state"] = int(params.status)
        if params.HasField("status_timestamp_after"):
            values["after"] = params.status_timestamp_after.ToNanoseconds()
        page_size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        if params.page_token:
            values["cursor_ts"], values["cursor_id"] = self._cursor(params.page_token)
        count, page = self._list_statements(
            "context_id" in values, "state" in values, "after" in values, "cursor_id" in values
        )

        total = (await self._db.fetch(count, values))[0][0]
        rows = await self._db.fetch(page, {**values, "limit": page_size + 1})

        tasks = []
        for data, _, _ in rows[:page_size]:
            task = Task()
            task.ParseFromString(data)
            tasks.append(task)
        next_token = None
        if len(rows) > page_size:
            _, sort_ts, task_id = rows[page_size - 1]
            next_token = encode_list_tasks_cursor(
                ListTasksCursor(timestamp_ns=sort_ts if sort_ts >= 0 else None, task_id=task_id)
            )
        return ListTasksResponse(
            tasks=tasks, next_page_token=next_token, page_size=page_size, total_size=total
        )

    def _list_statements(
        self, context_id: bool, state: bool, after: bool, cursor: bool
    ) -> tuple[Sql, Sql]:
        """ListTasks' count of the tasks the filters given match, and its page of them
        (after the cursor), ordered by status time then id, newest first."""
        key = (context_id, state, after, cursor)
        found = self._lists.get(key)
        if found is None:
            where = "owner = :owner"
            where += " AND context_id = :context_id" if context_id else ""
            where += " AND state = :state" if state else ""
            where += " AND sort_ts >= :after" if after else ""
            page = where + (
                " AND (sort_ts < :cursor_ts OR sort_ts = :cursor_ts AND id < :cursor_id)"
                if cursor
                else ""
            )
            found = self._lists[key] = (
                Sql(f"SELECT count(*) FROM {_TASKS} WHERE {where}", table=_TASKS),
                Sql(
                    f"SELECT data, sort_ts, id FROM {_TASKS} WHERE {page} "
                    "ORDER BY sort_ts DESC, id DESC LIMIT :limit",
                    table=_TASKS,
                ),
            )
        return found

    @staticmethod
    def _cursor(page_token: str) -> tuple[int, str]:
        cursor = decode_list_tasks_cursor(page_token)
        if cursor is None:
            raise InvalidParamsError(f"Invalid page token: {page_token}")
        return (cursor.timestamp_ns if cursor.timestamp_ns is not None else -1), cursor.task_id

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        key = (persona_owner(context), task_id)
        self._changes += 1
        self._new.pop(task_id, None)
        self._known.pop(key, None)
        self._unflushed.discard(key)
        # In the same group commit as the saves, so it comes after any still under way.
        await self._db.write(_DELETE, [{"owner": key[0], "id": task_id}])

    async def forget_persona(self, persona_id: str) -> None:
        """Delete every task of a persona (it was deleted: a new persona with its id must not
        find them), those waiting to be written included."""
        prefix = f"{persona_id}:"
        self._changes += 1
        for key in [key for key in self._known if key[0].startswith(prefix)]:
            del self._known[key]
        self._unflushed = {key for key in self._unflushed if not key[0].startswith(prefix)}
        # After the saves under way in the group commit, so none of them comes back.
        await self._db.write(_DELETE_LIKE, [{"prefix": f"{prefix}%"}])

    async def forget_caller(self, user: str) -> int:
        """Delete every task of ``user`` (a principal's name) with every persona, those
        waiting to be written included; how many were stored (the right to be forgotten).

        A scan of the owners (the persona's id comes first): rare, on request."""
        rows = await self._db.fetch(_OWNERS_LIKE, {"pattern": f"%:{like_escaped(user)}"})
        # LIKE matches in any case on SQLite, and a ":" may be in the name: exact ones only.
        owners = {owner: int(count) for owner, count in rows if owner.partition(":")[2] == user}
        self._changes += 1
        for key in [key for key in self._known if key[0].partition(":")[2] == user]:
            owners.setdefault(key[0], 0)
            del self._known[key]
        self._unflushed = {key for key in self._unflushed if key[0] not in owners}
        if owners:
            # After the saves under way in the group commit, so none of them comes back.
            await self._db.write(_DELETE_OWNER, [{"owner": owner} for owner in owners])
        return sum(owners.values())

    async def fail_unfinished(self, reason: str) -> int:
        """Mark every task left non-terminal (by a crash or a hard stop) as failed.

        Called at start-up, before any request is served, so no client waits
        forever on a task that nothing is working on. Returns how many were marked.
        """
        rows = await self._db.fetch(_UNFINISHED, _SETTLED_VALUES)
        updates: list[dict[str, Any]] = []
        for owner, task_id, data in rows:
            task = Task()
            task.ParseFromString(data)
            task.status.state = TaskState.TASK_STATE_FAILED
            task.status.message.CopyFrom(new_text_message(reason))
            task.status.timestamp.GetCurrentTime()
            updates.append(
                {
                    "owner": owner,
                    "id": task_id,
                    "state": int(task.status.state),
                    "sort_ts": sort_timestamp(task),
                    "data": task.SerializeToString(),
                }
            )
        if updates:
            await self._db.write(_FAIL, updates)
        return len(updates)
