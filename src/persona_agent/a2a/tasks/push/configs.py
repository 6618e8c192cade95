"""Push-notification configs: the SDK's database store, indexed, and capped.

:class:`IndexedConfigStore` wraps the SDK's ``DatabasePushNotificationConfigStore``:

- **Index.** The SDK's handler offers every event of every task to the sender, and its
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
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabasePushNotificationConfigStore, PushNotificationConfigStore
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError
from sqlalchemy import and_, delete, exists, func, insert, or_, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from persona_agent.a2a.context_keys import CALLER_KEY, TERMINAL_STATES
from persona_agent.db import push_callers_table, tasks_table

__all__ = ["ConfigLimits", "IndexedConfigStore"]

_LOCK_KEY = int.from_bytes(
    hashlib.blake2b(b"persona-agent:push-configs", digest_size=8).digest(), "big", signed=True
)
"""PostgreSQL advisory lock held while a config is counted and created."""

_CALLERS = push_callers_table.c
_TASKS = tasks_table.c
_FINISHED = [int(state) for state in TERMINAL_STATES]


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
    """The SDK's database config store, indexed and capped (see the module docstring)."""

    def __init__(
        self,
        inner: DatabasePushNotificationConfigStore,
        *,
        announce: Callable[[str], Awaitable[None]] | None = None,
        limits: ConfigLimits | None = None,
    ) -> None:
        self._inner = inner
        self._tasks: set[str] | None = None
        self._lock = asyncio.Lock()
        self._creating = asyncio.Lock()
        self._announce = announce
        self.limits = limits or ConfigLimits()

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
        inner = self._inner
        await inner._ensure_initialized()  # the SDK creates its table on first use
        async with inner.async_session_maker() as session:
            result = await session.execute(select(inner.config_model.task_id).distinct())
            return {str(task_id) for task_id in result.scalars()}

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
        inner = self._inner
        await inner._ensure_initialized()
        config_id = notification_config.id or task_id  # as the SDK's store names it
        owner = inner.owner_resolver(context)
        caller = str(context.state.get(CALLER_KEY) or f"owner:{owner}")[:300]
        async with self._exclusive() as conn:
            await self._check(conn, task_id, config_id, caller)
            saved = await inner.set_info(task_id, notification_config, context)
            row = {"task_id": task_id, "config_id": config_id, "owner": owner}
            await self._write(
                conn,
                delete(push_callers_table).where(
                    _CALLERS.task_id == task_id, _CALLERS.config_id == config_id
                ),
                insert(push_callers_table).values(
                    **row, caller=caller, created_ms=int(time.time() * 1000)
                ),
            )
        self.heard(task_id)
        if self._announce is not None:
            await self._announce(task_id)
        return saved

    @asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[AsyncConnection | None]:
        """One create at a time: in this process, and on PostgreSQL across replicas (a
        transaction holding the advisory lock, on a connection of its own; SQLite's one
        connection must stay free for the SDK's store)."""
        async with self._creating:
            engine = self._inner.engine
            if engine.dialect.name != "postgresql":
                yield None
                return
            async with engine.begin() as conn:
                await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
                yield conn

    async def _check(
        self, conn: AsyncConnection | None, task_id: str, config_id: str, caller: str
    ) -> None:
        model = self._inner.config_model
        limits = self.limits
        others = await self._count(
            conn,
            select(func.count())
            .select_from(model)
            .where(model.task_id == task_id, model.config_id != config_id),
        )
        if others >= limits.per_task:
            raise InvalidParamsError(
                message=f"Task {task_id} has {others} push notification configs, as many as "
                f"allowed (PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_TASK={limits.per_task}): "
                "delete one before adding another"
            )
        recent = int((time.time() - limits.unstored_seconds) * 1000)
        joined = push_callers_table.outerjoin(
            tasks_table, and_(_TASKS.owner == _CALLERS.owner, _TASKS.id == _CALLERS.task_id)
        )
        live = await self._count(
            conn,
            select(func.count())
            .select_from(joined)
            .where(
                _CALLERS.caller == caller,
                or_(_CALLERS.task_id != task_id, _CALLERS.config_id != config_id),
                or_(
                    _TASKS.state.not_in(_FINISHED),
                    and_(_TASKS.state.is_(None), _CALLERS.created_ms > recent),
                ),
            ),
        )
        if live >= limits.per_caller:
            raise InvalidParamsError(
                message=f"You have {live} push notification configs on tasks not yet finished, "
                f"as many as allowed (PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER="
                f"{limits.per_caller}): delete one, or wait for a task to finish"
            )

    async def _count(self, conn: AsyncConnection | None, statement: Any) -> int:
        if conn is not None:
            return int((await conn.execute(statement)).scalar_one())
        async with self._inner.engine.connect() as own:
            return int((await own.execute(statement)).scalar_one())

    async def _write(self, conn: AsyncConnection | None, *statements: Any) -> None:
        if conn is not None:
            for statement in statements:
                await conn.execute(statement)
            return
        async with self._inner.engine.begin() as own:
            for statement in statements:
                await own.execute(statement)

    async def prune(self) -> int:
        """Delete the configs of tasks no longer stored (retention deleted them, or their
        persona went); a config whose task may not be stored yet (``unstored_seconds``)
        stays. Returns how many configs went."""
        inner = self._inner
        await inner._ensure_initialized()
        configs = inner.config_model
        cutoff = int((time.time() - self.limits.unstored_seconds) * 1000)
        async with self._creating, inner.engine.begin() as conn:
            gone = ~exists().where(_TASKS.owner == _CALLERS.owner, _TASKS.id == _CALLERS.task_id)
            await conn.execute(delete(push_callers_table).where(_CALLERS.created_ms < cutoff, gone))
            result = await conn.execute(
                delete(configs)
                .where(
                    ~exists().where(_TASKS.owner == configs.owner, _TASKS.id == configs.task_id),
                    ~exists().where(
                        _CALLERS.task_id == configs.task_id,
                        _CALLERS.config_id == configs.config_id,
                    ),
                )
                .returning(configs.task_id)
            )
            pruned = [str(task_id) for task_id in result.scalars()]
        if self._tasks is not None:
            self._tasks.difference_update(pruned)  # no task: no config can come for it
        return len(pruned)

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return await self._inner.get_info(task_id, context)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """The task's configs, ``per_task`` at most (more: set before the cap was)."""
        if not await self.has_configs(task_id):
            return []
        configs = await self._inner.get_info_for_dispatch(task_id)
        return sorted(configs, key=lambda config: config.id)[: self.limits.per_task]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self._inner.delete_info(task_id, context, config_id)
        owner = self._inner.owner_resolver(context)
        statement = delete(push_callers_table).where(
            _CALLERS.task_id == task_id, _CALLERS.owner == owner
        )
        if config_id is not None:
            statement = statement.where(_CALLERS.config_id == config_id)
        await self._write(None, statement)
        if self._tasks is not None and not await self._inner.get_info_for_dispatch(task_id):
            self._tasks.discard(task_id)
