"""Replica leases: which replicas are alive, so only a dead replica's tasks fail.

Each replica has a row in ``pa_replicas`` and renews it (``heartbeat_at``, the
database's clock, so the machines' clocks do not matter) every third of the lease.
Every replica also sweeps, as often: rows not renewed for a whole lease are
deleted, and every task still under way whose replica has no row then ends
``failed`` ("replica lost"), found by whichever live replica sweeps first
(:meth:`~persona_agent.cluster.tasks.ClusterTaskStore.fail_orphans`). A replica
that stops gracefully deletes its own row after its tasks are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from datetime import timedelta

from sqlalchemy import delete, func, insert, update
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.cluster.tasks import ClusterTaskStore, replicas_table

__all__ = ["ReplicaLease", "new_replica_id"]

logger = logging.getLogger(__name__)

EVENTS_KEPT_SECONDS = 600.0
"""Task events older than this are swept (subscribers read them within moments)."""


def new_replica_id() -> str:
    """This process's replica id: host, process id and a random part (a restarted
    process is a new replica: its predecessor's tasks are not its own)."""
    return f"{socket.gethostname()[:60]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class ReplicaLease:
    """This replica's lease, renewed, and the sweep of dead replicas' tasks."""

    def __init__(
        self, engine: AsyncEngine, tasks: ClusterTaskStore, *, lease_seconds: float = 15.0
    ) -> None:
        self._engine = engine
        self._tasks = tasks
        self.replica = tasks.replica
        self.lease_seconds = lease_seconds
        self._runner: asyncio.Task[None] | None = None
        self.sweeps = 0

    async def start(self) -> None:
        """Take the lease, fail what dead replicas left under way, and keep renewing."""
        async with self._engine.begin() as conn:
            await conn.execute(insert(replicas_table).values(id=self.replica))
        await self.sweep()
        self._runner = asyncio.create_task(self._run(), name="persona-agent-lease")

    async def sweep(self) -> int:
        """Expire stale leases and fail the tasks no live replica holds; how many."""
        lease = timedelta(seconds=self.lease_seconds)
        async with self._engine.begin() as conn:
            gone = (
                await conn.execute(
                    delete(replicas_table)
                    .where(replicas_table.c.heartbeat_at < func.now() - lease)
                    .returning(replicas_table.c.id)
                )
            ).all()
        for (replica,) in gone:
            logger.warning("Replica %s lost its lease (no heartbeat for %ss)", replica, lease)
        failed = await self._tasks.fail_orphans()
        if failed:
            logger.warning("Marked %d task(s) of lost replicas as failed", failed)
        self.sweeps += 1
        if self.sweeps % 60 == 0:
            await self._tasks.forget_events(EVENTS_KEPT_SECONDS)
        return failed

    async def _renew(self) -> None:
        async with self._engine.begin() as conn:
            renewed = await conn.execute(
                update(replicas_table)
                .where(replicas_table.c.id == self.replica)
                .values(heartbeat_at=func.now())
            )
            if renewed.rowcount == 0:  # declared dead (paused too long): live on, anew
                logger.error(
                    "Replica %s had lost its lease; its running tasks were failed elsewhere",
                    self.replica,
                )
                await conn.execute(insert(replicas_table).values(id=self.replica))

    async def _run(self) -> None:
        interval = self.lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            try:
                await self._renew()
                await self.sweep()
            except Exception:
                logger.exception("Renewing the replica lease failed; retrying")

    async def aclose(self) -> None:
        """Stop renewing and give the lease up (call after this replica's tasks are done)."""
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        try:
            async with self._engine.begin() as conn:
                await conn.execute(
                    delete(replicas_table).where(replicas_table.c.id == self.replica)
                )
        except Exception:
            logger.exception("Could not give up the lease of replica %s", self.replica)
