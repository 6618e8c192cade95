"""Push-notification configs: in the SDK's table, indexed, and capped.

:class:`IndexedConfigStore` is the SDK's ``PushNotificationConfigStore`` on the table of
its ``DatabasePushNotificationConfigStore`` (the same rows: :mod:`.config_rows`), written
through the hub's group commit: configs stored by either are read by the other.

- **Index.** The SDK's handler offers every event of every task to the sender, and a
  store answers "which webhooks?" with a query: a query for each streamed token of every
  task, almost none of which has a webhook. The set of task ids that have configs is read
  once, kept up to date as configs are set and deleted through this store, and answers
  :meth:`~IndexedConfigStore.has_configs` from memory. Replicas share the set:
  ``announce`` tells the others of each task given a config (they call ``heard``).
- **Caps** (:class:`ConfigLimits`). A new config is refused with InvalidParams naming the
  limit and its setting when its task already has ``per_task`` configs, or when its caller
  (the principal, or ``ip:{address}`` without authentication) already has ``per_caller``
  on tasks not yet finished. Created through ``CreateTaskPushNotificationConfig`` or with
  a message alike (the SDK calls :meth:`~IndexedConfigStore.set_info` for both); replacing
  a config (same task and id) adds none. Counted in the database, so replicas sharing
  PostgreSQL count every replica's configs; creates are serialized (an advisory lock on
  PostgreSQL), so concurrent ones cannot both take the last place. Who created a config is
  kept in ``pa_push_callers`` (the SDK's table does not say). Dispatch reads ``per_task``
  configs at most, so one event makes that many POSTs at most.
- **Pruning.** :meth:`~IndexedConfigStore.prune` (each retention sweep) deletes the configs
  of tasks the task table no longer holds: configs never outlive their task.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError

from persona_agent.a2a.context_keys import CALLER_KEY, TERMINAL_STATES
from persona_agent.a2a.tasks.push.config_rows import CONFIGS, EXISTS, ConfigRows, create
from persona_agent.a2a.tasks.task_store import persona_owner
from persona_agent.db import DatabaseError, GroupCommitWriter, Sql, in_list
from persona_agent.db.database_errors import translated

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["ConfigLimits", "IndexedConfigStore"]

_LOCK_KEY = int.from_bytes(
    hashlib.blake2b(b"persona-agent:push-configs", digest_size=8).digest(), "big", signed=True
)
"""PostgreSQL advisory lock held while a config is counted and created."""
_LOCK = Sql("SELECT pg_advisory_xact_lock(:key)")

_CALLERS = "pa_push_callers"
"""Who created each config (:data:`persona_agent.db.task_tables.push_callers_table`)."""
_TASKS = "pa_tasks"
"""The tasks (:data:`persona_agent.db.task_tables.tasks_table`)."""
_FINISHED, _FINISHED_VALUES = in_list("finished", [int(state) for state in TERMINAL_STATES])

_TASK_IDS = Sql(f"SELECT DISTINCT task_id FROM {CONFIGS}", table=CONFIGS)
_ANY_OF_TASK = Sql(f"SELECT 1 FROM {CONFIGS} WHERE task_id = :task_id LIMIT 1", table=CONFIGS)
_OTHERS_OF_TASK = Sql(
    f"SELECT count(*) FROM {CONFIGS} WHERE task_id = :task_id AND config_id != :config_id",
    table=CONFIGS,
)
_LIVE_OF_CALLER = Sql(
    f"SELECT count(*) FROM {_CALLERS} LEFT OUTER JOIN {_TASKS} "
    f"ON {_TASKS}.owner = {_CALLERS}.owner AND {_TASKS}.id = {_CALLERS}.task_id "
    f"WHERE {_CALLERS}.caller = :caller "
    f"AND ({_CALLERS}.task_id != :task_id OR {_CALLERS}.config_id != :config_id) "
    f"AND (({_TASKS}.state NOT IN {_FINISHED}) "
    f"OR {_TASKS}.state IS NULL AND {_CALLERS}.created_ms > :recent)",
    table=_CALLERS,
)
"""The caller's configs but this one on tasks not finished (or not stored yet, but lately)."""
_FORGET_CALLER = Sql(
    f"DELETE FROM {_CALLERS} WHERE task_id = :task_id AND config_id = :config_id",
    table=_CALLERS,
)
_ADD_CALLER = Sql(
    f"INSERT INTO {_CALLERS} (task_id, config_id, owner, caller, created_ms) "
    "VALUES (:task_id, :config_id, :owner, :caller, :created_ms)",
    table=_CALLERS,
)
_DELETE_CALLERS = Sql(
    f"DELETE FROM {_CALLERS} WHERE task_id = :task_id AND owner = :owner", table=_CALLERS
)
_DELETE_CALLER = Sql(
    f"DELETE FROM {_CALLERS} "
    "WHERE task_id = :task_id AND owner = :owner AND config_id = :config_id",
    table=_CALLERS,
)
_PRUNE_CALLERS = Sql(
    f"DELETE FROM {_CALLERS} WHERE created_ms < :cutoff AND NOT (EXISTS (SELECT * "
    f"FROM {_TASKS} WHERE {_TASKS}.owner = {_CALLERS}.owner "
    f"AND {_TASKS}.id = {_CALLERS}.task_id))",
    table=_CALLERS,
)
"""Who created the configs made before the cutoff whose task is not stored."""
_UNOWNED = (
    f"NOT (EXISTS (SELECT * FROM {_TASKS} WHERE {_TASKS}.owner = {CONFIGS}.owner "
    f"AND {_TASKS}.id = {CONFIGS}.task_id)) AND NOT (EXISTS (SELECT * FROM {_CALLERS} "
    f"WHERE {_CALLERS}.task_id = {CONFIGS}.task_id "
    f"AND {_CALLERS}.config_id = {CONFIGS}.config_id))"
)
"""A config whose task is not stored, and whose creator is forgotten
(:data:`_PRUNE_CALLERS`) or was never known (set through the SDK's own store)."""
_PRUNABLE = Sql(f"SELECT task_id, config_id FROM {CONFIGS} WHERE {_UNOWNED}", table=CONFIGS)
_PRUNE = Sql(
    f"DELETE FROM {CONFIGS} WHERE task_id = :task_id AND config_id = :config_id AND {_UNOWNED}",
    table=CONFIGS,
)
"""One config of :data:`_PRUNABLE`, unless its task came or it was set again meanwhile."""


@dataclass(frozen=True, slots=True)
class ConfigLimits:
    per_task: int = 10
    """Configs of one task (``PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_TASK``)."""
    per_caller: int = 100
    """Configs of one caller on tasks not yet finished
    (``PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER``)."""
    unstored_seconds: float = 3600.0
    """A config whose task is not (yet) in the task table counts this long: a message's
    config is saved before its task is."""


class IndexedConfigStore(PushNotificationConfigStore):
    """Push configs in the SDK's table, through the hub's group commit, indexed and capped
    (see the module docstring).

    ``encryption_key``: a Fernet key the configs are encrypted with in the table
    (:class:`~persona_agent.a2a.tasks.push.config_rows.ConfigRows`); ``owner_resolver``:
    whose a config is, as a task is its owner's (:func:`persona_owner`).

    Raises:
        ValueError: ``encryption_key`` is not a Fernet key.
    """

    def __init__(
        self,
        writer: GroupCommitWriter,
        *,
        encryption_key: str | bytes | None = None,
        owner_resolver: Callable[[ServerCallContext], str] = persona_owner,
        announce: Callable[[str], Awaitable[None]] | None = None,
        limits: ConfigLimits | None = None,
    ) -> None:
        self._db = writer
        self._rows = ConfigRows(encryption_key)
        self.owner_resolver = owner_resolver
        self._made = False
        self._tasks: set[str] | None = None
        self._lock = asyncio.Lock()
        self._creating = asyncio.Lock()
        self._announce = announce
        self.limits = limits or ConfigLimits()

    async def _ready(self) -> None:
        """The SDK's table made unless it is there, on first use (as the SDK's store does)."""
        if self._made:
            return
        if not await self._db.fetch(EXISTS, {"name": CONFIGS}):
            try:
                await self._create()
            except DatabaseError:
                # Another replica made it meanwhile, and PostgreSQL refused the second
                # CREATE TABLE IF NOT EXISTS of the two (a duplicate key): it is there now.
                await self._create()
        self._made = True

    async def _create(self) -> None:
        if self._db.dialect != "postgresql":
            await self._db.write_together([(statement, [{}]) for statement in create()])
            return
        # In a transaction of its own, whose failure (above) fails no other write.
        async with self._db.engine.begin() as conn:
            for statement in create():
                await _on(conn, statement, {})

    def heard(self, task_id: str) -> None:
        """Another replica set a config for ``task_id``."""
        if self._tasks is not None:
            self._tasks.add(task_id)

    async def has_configs(self, task_id: str) -> bool:
        if self._tasks is None:
            async with self._lock:
                if self._tasks is None:
                    self._tasks = await self._load()
        return task_id in self._tasks

    async def _load(self) -> set[str]:
        await self._ready()
        return {str(task_id) for (task_id,) in await self._db.fetch(_TASK_IDS)}

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig | None:
        """Save the config, unless it would pass a cap.

        Raises:
            InvalidParamsError: the task, or the caller, has as many configs as allowed.
        """
        await self._ready()
        config = normalize_push_notification_config(task_id, notification_config)
        owner = self.owner_resolver(context)
        caller = str(context.state.get(CALLER_KEY) or f"owner:{owner}")[:300]
        key = {"task_id": task_id, "config_id": config.id}
        async with self._exclusive() as conn:
            await self._check(conn, task_id, config.id, caller)
            created_ms = int(time.time() * 1000)
            await self._write(
                conn,
                [
                    (ConfigRows.UPSERT, [self._rows.row(config, owner)]),
                    (_FORGET_CALLER, [key]),
                    (
                        _ADD_CALLER,
                        [{**key, "owner": owner, "caller": caller, "created_ms": created_ms}],
                    ),
                ],
            )
        self.heard(task_id)
        if self._announce is not None:
            await self._announce(task_id)
        return config

    @asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[AsyncConnection | None]:
        """One create at a time: in this process, and on PostgreSQL across replicas (a
        transaction holding the advisory lock, on a connection of its own, in which the
        config is counted and written)."""
        async with self._creating:
            if self._db.dialect != "postgresql":
                yield None
                return
            async with self._db.engine.begin() as conn:
                await _on(conn, _LOCK, {"key": _LOCK_KEY})
                yield conn

    async def _check(
        self, conn: AsyncConnection | None, task_id: str, config_id: str, caller: str
    ) -> None:
        limits = self.limits
        key = {"task_id": task_id, "config_id": config_id}
        others = await self._count(conn, _OTHERS_OF_TASK, key)
        if others >= limits.per_task:
            raise InvalidParamsError(
                message=f"Task {task_id} has {others} push notification configs, as many as "
                f"allowed (PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_TASK={limits.per_task}): "
                "delete one before adding another"
            )
        recent = int((time.time() - limits.unstored_seconds) * 1000)
        live = await self._count(
            conn,
            _LIVE_OF_CALLER,
            {**key, "caller": caller, "recent": recent, **_FINISHED_VALUES},
        )
        if live >= limits.per_caller:
            raise InvalidParamsError(
                message=f"You have {live} push notification configs on tasks not yet finished, "
                f"as many as allowed (PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER="
                f"{limits.per_caller}): delete one, or wait for a task to finish"
            )

    async def _count(
        self, conn: AsyncConnection | None, statement: Sql, values: dict[str, Any]
    ) -> int:
        rows = await (
            self._db.fetch(statement, values) if conn is None else _on(conn, statement, values)
        )
        return int(rows[0][0])

    async def _write(
        self, conn: AsyncConnection | None, writes: list[tuple[Sql, list[dict[str, Any]]]]
    ) -> None:
        """``writes`` in one transaction: the group commit's, or ``conn``'s."""
        if conn is None:
            await self._db.write_together(writes)
            return
        for statement, rows in writes:
            await _on(conn, statement, rows)

    async def prune(self) -> int:
        """Delete the configs of tasks no longer stored (retention deleted them, or their
        persona went); a config whose task may not be stored yet (``unstored_seconds``)
        stays. Returns how many configs went."""
        await self._ready()
        cutoff = int((time.time() - self.limits.unstored_seconds) * 1000)
        async with self._creating:
            await self._db.write(_PRUNE_CALLERS, [{"cutoff": cutoff}])
            pruned = [
                {"task_id": str(task_id), "config_id": str(config_id)}
                for task_id, config_id in await self._db.fetch(_PRUNABLE)
            ]
            if pruned:
                await self._db.write(_PRUNE, pruned)
        if self._tasks is not None:  # no task: no config can come for it
            self._tasks.difference_update(row["task_id"] for row in pruned)
        return len(pruned)

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        """The task's configs that the caller (its owner) set."""
        await self._ready()
        owner = self.owner_resolver(context)
        rows = await self._db.fetch(ConfigRows.OF_OWNER, {"task_id": task_id, "owner": owner})
        return self._rows.configs(rows)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """The task's configs, ``per_task`` at most (more: set before the cap was)."""
        if not await self.has_configs(task_id):
            return []
        configs = self._rows.configs(await self._db.fetch(ConfigRows.OF_TASK, {"task_id": task_id}))
        return sorted(configs, key=lambda config: config.id)[: self.limits.per_task]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        """Delete the caller's config ``config_id`` of the task, or all the caller's."""
        await self._ready()
        values = {"task_id": task_id, "owner": self.owner_resolver(context), "config_id": config_id}
        await self._db.write_together(
            [(ConfigRows.DELETE, [values]), (_DELETE_CALLERS, [values])]
            if config_id is None
            else [(ConfigRows.DELETE_ONE, [values]), (_DELETE_CALLER, [values])]
        )
        if self._tasks is not None and not await self._db.fetch(_ANY_OF_TASK, values):
            self._tasks.discard(task_id)


async def _on(
    conn: AsyncConnection, statement: Sql, values: dict[str, Any] | list[dict[str, Any]]
) -> list[tuple[Any, ...]]:
    """PostgreSQL: ``statement`` in the transaction of ``conn`` (a connection of its own:
    the advisory lock's, the table's making); its errors are the hub's own
    (:mod:`persona_agent.db.database_errors`), as through the writer."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    try:
        result = await conn.execute(text(statement.for_dialect("postgresql")), values)
    except DBAPIError as error:
        raise translated(error) from error
    return [tuple(row) for row in result.all()] if result.returns_rows else []
