"""Retention: old tasks, conversation messages and memories deleted in the background, so
the database does not grow without bound.

Limits (each 0 for none; docs/security.md): a task's age, for tasks and for conversation
messages, how many are kept and how many bytes of them, and a memory's age. The oldest go
first. Tasks still ``submitted`` or ``working`` are never deleted (a restart marks those
of a stopped hub failed, and then they age like the rest). The messages are each
caller's within its budget and its fair share of the hub's limit
(:mod:`persona_agent.conversations.message_retention`); a conversation's running summary,
alternatives, documents attached to it (A2A file parts) and images go with its last
message. Each sweep is a few ``DELETE`` statements in the database's group commit, one
per limit (one for every caller's messages), then the ``prune`` callables
(push-notification configs of the tasks deleted go with them).

The sweep deletes from the tables of several owners (the A2A tasks, the conversations,
memory, knowledge, media): it sits above all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import TaskState

from persona_agent.conversations.message_retention import MessageLimits, MessageRetention
from persona_agent.db import GroupCommitWriter, Sql

__all__ = ["DOCUMENT_GRACE_SECONDS", "Retention", "RetentionLimits"]

logger = logging.getLogger(__name__)

_RUNNING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
_IDLE = f"state NOT IN ({', '.join(str(int(state)) for state in _RUNNING)})"
_TASKS = "pa_tasks"
_MESSAGES = "pa_messages"
_MEMORIES = "pa_memories"
_DOCUMENTS = "pa_documents"
_CHUNKS = "pa_document_chunks"
_MEDIA = "pa_media"
_ORPHAN_DOCUMENT = (
    f"{_DOCUMENTS}.conversation <> '' AND {_DOCUMENTS}.created_ms < :cutoff AND NOT EXISTS "
    f"(SELECT 1 FROM {_MESSAGES} WHERE {_MESSAGES}.conversation = "
    f"{_DOCUMENTS}.persona_id || ':' || {_DOCUMENTS}.conversation)"
)
"""A document attached to a conversation (docs/knowledge.md) whose conversation has no
message left (the key in ``pa_messages`` is ``{persona}:{conversation}``)."""
_ORPHAN_DOCUMENTS = (
    Sql(
        f"DELETE FROM {_CHUNKS} WHERE document_id IN "
        f"(SELECT id FROM {_DOCUMENTS} WHERE {_ORPHAN_DOCUMENT})",
        table=_CHUNKS,
    ),
    Sql(f"DELETE FROM {_DOCUMENTS} WHERE {_ORPHAN_DOCUMENT}", table=_DOCUMENTS),
)
_ORPHAN_MEDIA = Sql(
    f"DELETE FROM {_MEDIA} WHERE created_ms < :cutoff AND NOT EXISTS (SELECT 1 FROM "
    f"{_MESSAGES} WHERE {_MESSAGES}.conversation = {_MEDIA}.conversation)",
    table=_MEDIA,
)
"""An image goes with its conversation's last message (docs/media.md)."""
DOCUMENT_GRACE_SECONDS = 3600
"""A conversation's document is stored before its turn's messages are: one younger than
this is kept whether its conversation has messages or not."""


@dataclass(frozen=True, slots=True)
class RetentionLimits:
    """What is kept; 0: no limit."""

    task_max_age_days: float = 30
    task_max_count: int = 100_000
    task_max_bytes: int = 1024**3
    message_max_count: int = 1_000_000
    message_max_bytes: int = 1024**3
    memory_max_age_days: float = 365
    caller_message_max_count: int = 0
    """A caller's messages kept at most (``PERSONA_AGENT_CALLER_MAX_MESSAGES``)."""
    caller_message_max_bytes: int = 0
    """Bytes of a caller's messages kept at most (``PERSONA_AGENT_CALLER_MAX_MESSAGE_BYTES``)."""
    anonymous_is_a_caller: bool = True
    """Whether the anonymous conversations are held to the caller budgets (false on a hub
    that identifies nobody: they are all it keeps)."""

    @property
    def messages(self) -> MessageLimits:
        """The limits on conversation messages."""
        return MessageLimits(
            self.message_max_count,
            self.message_max_bytes,
            self.caller_message_max_count,
            self.caller_message_max_bytes,
            self.anonymous_is_a_caller,
        )


class Retention:
    """Deletes what is over the limits: :meth:`sweep` once, :meth:`run` every ``interval``."""

    def __init__(
        self,
        writer: GroupCommitWriter,
        limits: RetentionLimits,
        *,
        prune: Sequence[Callable[[], Awaitable[object]]] = (),
    ) -> None:
        self._db = writer
        self._messages = MessageRetention(writer)
        self.limits = limits
        self._prune = prune

    async def sweep(self) -> None:
        """Delete the tasks, messages and memories over the limits (the oldest first)."""
        limits = self.limits
        statements: list[tuple[Sql, dict[str, Any]]] = []
        if limits.task_max_age_days > 0:
            cutoff = time.time_ns() - int(limits.task_max_age_days * 86_400 * 1e9)
            statements.append((_OLDER_TASKS, {"cutoff": cutoff}))
        if limits.task_max_count > 0:
            statements.append((_NEWEST_TASKS, {"n": limits.task_max_count}))
        if limits.task_max_bytes > 0:
            statements.append((_SMALLEST_TASKS, {"n": limits.task_max_bytes}))
        if limits.memory_max_age_days > 0:
            cutoff_ms = int((time.time() - limits.memory_max_age_days * 86_400) * 1000)
            statements.append((_OLDER_MEMORIES, {"cutoff": cutoff_ms}))
        for statement, parameters in statements:
            await self._db.write(statement, [parameters])
        if limits.messages.limited:
            await self._messages.sweep(limits.messages)
            aged = {"cutoff": int((time.time() - DOCUMENT_GRACE_SECONDS) * 1000)}
            # In one transaction: no document is left without its passages.
            await self._db.write_together([(sql, [aged]) for sql in _ORPHAN_DOCUMENTS])
            await self._db.write(_ORPHAN_MEDIA, [aged])
        for prune in self._prune:
            await prune()

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        """Sweep now and every ``interval`` seconds until ``stop`` is set; a failed sweep is
        logged and the next one tried."""
        while not stop.is_set():
            try:
                await self.sweep()
            except Exception:
                logger.exception("Retention sweep failed; trying again in %gs", interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


def _keep_newest(table: str, order: str, where: str) -> Sql:
    """Delete all but the newest ``:n`` rows (by ``order``) that match ``where``."""
    return Sql(
        f"DELETE FROM {table} WHERE {where} AND {order} <= ("
        f"SELECT {order} FROM {table} WHERE {where} ORDER BY {order} DESC LIMIT 1 OFFSET :n)",
        table=table,
    )


def _keep_bytes(table: str, order: str, column: str, where: str) -> Sql:
    """Delete the oldest rows (by ``order``) matching ``where`` beyond the newest whose
    ``column`` add up to ``:n`` bytes."""
    return Sql(
        f"DELETE FROM {table} WHERE {where} AND {order} <= ("
        f"SELECT {order} FROM (SELECT {order}, SUM(LENGTH({column})) OVER "
        f"(ORDER BY {order} DESC) AS total FROM {table} WHERE {where}) AS newest "
        f"WHERE total > :n ORDER BY {order} DESC LIMIT 1)",
        table=table,
    )


_OLDER_TASKS = Sql(f"DELETE FROM {_TASKS} WHERE {_IDLE} AND sort_ts < :cutoff", table=_TASKS)
_NEWEST_TASKS = _keep_newest(_TASKS, "sort_ts", _IDLE)
_SMALLEST_TASKS = _keep_bytes(_TASKS, "sort_ts", "data", _IDLE)
_OLDER_MEMORIES = Sql(f"DELETE FROM {_MEMORIES} WHERE at_ms < :cutoff", table=_MEMORIES)
