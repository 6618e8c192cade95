"""Retention: old tasks, conversation messages and memories deleted in the background, so
the database does not grow without bound.

Limits (each 0 for none; docs/security.md): a task's age, for tasks and for conversation
messages, how many are kept and how many bytes of them, and a memory's age. The oldest go
first; a conversation's running summary, and the documents attached to it (A2A file
parts), go with its last message. Tasks still
``submitted`` or ``working`` are never deleted (a restart marks those of a stopped hub
failed, and then they age like the rest). Each sweep is a few
``DELETE`` statements in the database's group commit, one per limit, then the ``prune``
callables (push-notification configs of the tasks deleted go with them).

Messages are kept per caller first (docs/conversations.md, "Storage quotas"): a caller
over its own budget (``caller_message_max_*``) loses its own oldest messages; then, if
the hub's limit is still passed, it is shared out fairly (:func:`fair_shares`): the
callers over the fair level lose their oldest down to it, and a caller under the hub's
limit divided by the number of callers loses nothing. One caller's growth never deletes
another's messages. Every anonymous conversation is one caller's (the keys do not tell
anonymous callers apart); on a hub that identifies nobody
(``anonymous_is_a_caller`` false) it is the hub's only caller and has no budget of its
own.
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
from sqlalchemy import Delete, TextClause, bindparam, delete, func, or_, select, text

from persona_agent.db import (
    GroupCommitWriter,
    document_chunks_table,
    documents_table,
    media_table,
    memories_table,
    messages_table,
    summaries_table,
    swipes_table,
    tasks_table,
)
from persona_agent.db_conversations import owned_by, owner_expression, owner_row

__all__ = ["DOCUMENT_GRACE_SECONDS", "Retention", "RetentionLimits", "fair_shares"]

logger = logging.getLogger(__name__)

_RUNNING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
_IDLE = f"state NOT IN ({', '.join(str(int(state)) for state in _RUNNING)})"
_TASKS = tasks_table.name
_MESSAGES = messages_table.name
_MEMORIES = memories_table.name
_ORPHAN_SUMMARIES = text(
    f"DELETE FROM {summaries_table.name} WHERE NOT EXISTS (SELECT 1 FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = {summaries_table.name}.conversation)"
)
"""A running summary goes with its conversation's last message (docs/memory.md)."""
_ORPHAN_SWIPES = text(
    f"DELETE FROM {swipes_table.name} WHERE NOT EXISTS (SELECT 1 FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = {swipes_table.name}.conversation AND "
    f"({swipes_table.name}.anchor = 0 OR {_MESSAGES}.seq = {swipes_table.name}.anchor))"
)
"""An answer's alternatives go with the user message they answer (docs/conversations.md)."""
_DOCUMENTS = documents_table.name
_ORPHAN_DOCUMENT = (
    f"{_DOCUMENTS}.conversation <> '' AND {_DOCUMENTS}.created_ms < :cutoff AND NOT EXISTS "
    f"(SELECT 1 FROM {_MESSAGES} WHERE {_MESSAGES}.conversation = "
    f"{_DOCUMENTS}.persona_id || ':' || {_DOCUMENTS}.conversation)"
)
"""A document attached to a conversation (docs/knowledge.md) whose conversation has no
message left (the key in ``pa_messages`` is ``{persona}:{conversation}``)."""
_ORPHAN_DOCUMENTS = (
    text(
        f"DELETE FROM {document_chunks_table.name} WHERE document_id IN "
        f"(SELECT id FROM {_DOCUMENTS} WHERE {_ORPHAN_DOCUMENT})"
    ),
    text(f"DELETE FROM {_DOCUMENTS} WHERE {_ORPHAN_DOCUMENT}"),
)
_ORPHAN_MEDIA = text(
    f"DELETE FROM {media_table.name} WHERE created_ms < :cutoff AND NOT EXISTS (SELECT 1 FROM "
    f"{_MESSAGES} WHERE {_MESSAGES}.conversation = {media_table.name}.conversation)"
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
    """Bytes of a caller's messages kept at most (``PERSONA_AGENT_CALLER_MAX_BYTES``)."""
    anonymous_is_a_caller: bool = True
    """Whether the anonymous conversations are held to the caller budgets (false on a hub
    that identifies nobody: they are all it keeps)."""

    @property
    def messages_limited(self) -> bool:
        return bool(
            self.message_max_count
            or self.message_max_bytes
            or self.caller_message_max_count
            or self.caller_message_max_bytes
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
        self.limits = limits
        self._prune = prune

    async def sweep(self) -> None:
        """Delete the tasks, messages and memories over the limits (the oldest first)."""
        limits = self.limits
        statements: list[tuple[TextClause, dict[str, Any]]] = []
        if limits.task_max_age_days > 0:
            cutoff = time.time_ns() - int(limits.task_max_age_days * 86_400 * 1e9)
            older = text(f"DELETE FROM {_TASKS} WHERE {_IDLE} AND sort_ts < :cutoff")
            statements.append((older, {"cutoff": cutoff}))
        if limits.task_max_count > 0:
            newest = _keep_newest(_TASKS, "sort_ts", _IDLE)
            statements.append((newest, {"n": limits.task_max_count}))
        if limits.task_max_bytes > 0:
            smallest = _keep_bytes(_TASKS, "sort_ts", "data", _IDLE)
            statements.append((smallest, {"n": limits.task_max_bytes}))
        if limits.memory_max_age_days > 0:
            cutoff_ms = int((time.time() - limits.memory_max_age_days * 86_400) * 1000)
            older = text(f"DELETE FROM {_MEMORIES} WHERE at_ms < :cutoff")
            statements.append((older, {"cutoff": cutoff_ms}))
        for statement, parameters in statements:
            await self._db.write(statement, [parameters])
        if limits.messages_limited:
            await self._sweep_messages()
            await self._db.write(_ORPHAN_SUMMARIES, [{}])
            await self._db.write(_ORPHAN_SWIPES, [{}])
            aged = {"cutoff": int((time.time() - DOCUMENT_GRACE_SECONDS) * 1000)}
            # In one transaction: no document is left without its passages.
            await self._db.write_together([(sql, [aged]) for sql in _ORPHAN_DOCUMENTS])
            await self._db.write(_ORPHAN_MEDIA, [aged])
        for prune in self._prune:
            await prune()

    async def _sweep_messages(self) -> None:
        """Each caller's oldest messages over its budget, then over its fair share of the
        hub's limits (see the module's docstring)."""
        limits = self.limits
        usage = {str(owner): (int(n), int(size)) for owner, n, size in await self._usage()}
        counts = {owner: n for owner, (n, _) in usage.items()}
        sizes = {owner: size for owner, (_, size) in usage.items()}
        held = {o for o in usage if o or limits.anonymous_is_a_caller}
        count_targets = fair_shares(
            _budgets(counts, held, limits.caller_message_max_count), limits.message_max_count
        )
        size_targets = fair_shares(
            _budgets(sizes, held, limits.caller_message_max_bytes), limits.message_max_bytes
        )
        for owner in sorted(usage):
            if count_targets[owner] < counts[owner] or size_targets[owner] < sizes[owner]:
                targets = {"count": count_targets[owner], "size": size_targets[owner]}
                await self._db.write(_trim(owner), [{**targets, **owner_row(owner)}])

    async def _usage(self) -> list[tuple[Any, ...]]:
        """Each caller's (owner part's) messages and their bytes."""
        m = messages_table.c
        rows = select(
            owner_expression(m.conversation).label("owner"),
            func.length(m.message).label("size"),
        ).subquery("owned")
        query = select(
            rows.c.owner, func.count(), func.coalesce(func.sum(rows.c.size), 0)
        ).group_by(rows.c.owner)
        return await self._db.fetch(query)

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


def fair_shares(wants: dict[str, int], total: int) -> dict[str, int]:
    """What each of ``wants`` keeps of ``total`` (0: no limit): all it wants if they fit,
    else the most a level lets each keep (water-filling): those under the level keep
    all, those over it keep the level, and the level is at least ``total`` divided by
    the number of callers."""
    if total <= 0 or sum(wants.values()) <= total:
        return dict(wants)
    kept: dict[str, int] = {}
    left = total
    ordered = sorted(wants.items(), key=lambda item: item[1])
    for index, (owner, want) in enumerate(ordered):
        level = left // (len(ordered) - index)
        if want > level:
            kept.update((other, level) for other, _ in ordered[index:])
            return kept
        kept[owner] = want
        left -= want
    return kept


def _budgets(wants: dict[str, int], held: set[str], budget: int) -> dict[str, int]:
    """``wants``, each of ``held`` lowered to ``budget`` (0: none)."""
    if budget <= 0:
        return dict(wants)
    return {owner: min(want, budget) if owner in held else want for owner, want in wants.items()}


def _trim(owner: str) -> Delete:
    """Delete ``owner``'s oldest messages beyond its newest ``:count`` whose bytes add up
    to ``:size`` at most."""
    m = messages_table.c
    mine = owned_by(m.conversation, owner)
    newest_first = m.seq.desc()
    ranked = (
        select(
            m.seq,
            func.sum(func.length(m.message)).over(order_by=newest_first).label("total"),
            func.row_number().over(order_by=newest_first).label("n"),
        )
        .where(mine)
        .subquery("newest")
    )
    # The newest message over a limit (those before it are over it too).
    cut = (
        select(func.max(ranked.c.seq))
        .where(or_(ranked.c.total > bindparam("size"), ranked.c.n > bindparam("count")))
        .scalar_subquery()
    )
    return delete(messages_table).where(mine, m.seq <= cut)


def _keep_newest(table: str, order: str, where: str) -> TextClause:
    """Delete all but the newest ``:n`` rows (by ``order``) that match ``where``."""
    return text(
        f"DELETE FROM {table} WHERE {where} AND {order} <= ("
        f"SELECT {order} FROM {table} WHERE {where} ORDER BY {order} DESC LIMIT 1 OFFSET :n)"
    )


def _keep_bytes(table: str, order: str, column: str, where: str) -> TextClause:
    """Delete the oldest rows (by ``order``) matching ``where`` beyond the newest whose
    ``column`` add up to ``:n`` bytes."""
    return text(
        f"DELETE FROM {table} WHERE {where} AND {order} <= ("
        f"SELECT {order} FROM (SELECT {order}, SUM(LENGTH({column})) OVER "
        f"(ORDER BY {order} DESC) AS total FROM {table} WHERE {where}) AS newest "
        f"WHERE total > :n ORDER BY {order} DESC LIMIT 1)"
    )
