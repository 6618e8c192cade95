"""Replicas: many ``persona-agent serve`` processes on one PostgreSQL, one hub.

:class:`Cluster` holds what a replica adds to a single hub, all on the database they
share: the SDK's cluster mode (a versioned task store and a task event stream, so
any replica reads, lists, subscribes to and cancels any task), a lease per replica
(a dead replica's unfinished tasks fail, nobody else's), and advisory locks (one
turn at a time per conversation). The persona store is
:class:`~persona_agent.personas.stores.sql_store.SqlPersonaStore`. docs/deployment.md
tells how to run it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from sqlalchemy import text

from persona_agent.cluster.advisory_locks import AdvisoryLocks
from persona_agent.cluster.leases import ReplicaLease, new_replica_id
from persona_agent.cluster.notify import Listener
from persona_agent.cluster.task_events import PgTaskEventStream
from persona_agent.cluster.tasks import CANCEL_CHANNEL, ClusterTaskStore
from persona_agent.db import NOTIFY, GroupCommitWriter

__all__ = ["Cluster"]

logger = logging.getLogger(__name__)


class Cluster:
    """This replica's part in the hub: its id, lease, task store, event stream and locks."""

    def __init__(
        self, writer: GroupCommitWriter, *, lease_seconds: float = 15.0, pool_size: int = 10
    ) -> None:
        engine = writer.engine
        self.replica = new_replica_id()
        self.listener = Listener(engine.url)
        self.tasks = ClusterTaskStore(writer, self.replica, pool_size=pool_size)
        self.events = PgTaskEventStream(engine, self.listener)
        self.lease = ReplicaLease(engine, self.tasks, lease_seconds=lease_seconds)
        self.locks = AdvisoryLocks(engine.url)
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self, on_cancel: Callable[[str], Coroutine[Any, Any, None]]) -> None:
        """Listen, take the lease (failing what lost replicas left), and call
        ``on_cancel`` with the id of each task canceled anywhere."""

        def canceled(task_id: str) -> None:
            task = asyncio.create_task(on_cancel(task_id))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

        await self.tasks.start()
        await self.events.start()
        await self.listener.listen(CANCEL_CHANNEL, canceled)
        await self.listener.start()
        await self.lease.start()
        await self._check_autovacuum()
        logger.info("Replica %s joined the hub", self.replica)

    async def _check_autovacuum(self) -> None:
        """Warn when PostgreSQL does not vacuum by itself: every task is written several
        times, and without vacuuming the dead rows pile up and every write gets slower."""
        async with self.tasks.engine.connect() as conn:
            setting = (await conn.execute(text("SELECT current_setting('autovacuum')"))).scalar()
        if setting != "on":
            logger.warning(
                "PostgreSQL runs with autovacuum off: the hub's tables fill with dead rows "
                "and it slows down over time; turn autovacuum on (its default) or VACUUM "
                "regularly (docs/deployment.md)"
            )

    async def announce(self, channel: str, payload: str) -> None:
        """Notify every replica (this one too) on ``channel``."""
        async with self.tasks.engine.begin() as conn:
            await conn.execute(NOTIFY, {"channel": channel, "payload": payload})

    async def aclose(self) -> None:
        """Give the lease up and stop listening (after this replica's tasks are done)."""
        await self.lease.aclose()
        await self.locks.aclose()
        await self.listener.aclose()
        await self.tasks.aclose()
