"""Retention: old tasks, conversation messages and memories deleted in the background, so
the database does not grow without bound.

Limits (each 0 for none; docs/security.md): a task's age, for tasks and for conversation
messages, how many are kept and how many bytes of them, and a memory's age. The oldest go
first; a conversation's running summary, and the documents attached to it (A2A file
parts), go with its last message. Tasks still
``submitted`` or ``working`` are never deleted (a restart marks those of a stopped hub
failed, and then they age like the rest). Each sweep is a few
``DELETE`` statements in the database's group commit, one per limit (one for every
caller's messages), then the ``prune`` callables (push-notification configs of the tasks
deleted go with them).

Messages are kept per caller first (docs/conversations.md, "Storage quotas"): a caller
over its own budget (``caller_message_max_*``) loses its own oldest messages; then, if
the hub's limit is still passed, it is shared out fairly (:func:`fair_level`): the
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
from sqlalchemy import (
    Delete,
    TextClause,
    and_,
    bindparam,
    delete,
    func,
    literal_column,
    or_,
    select,
    text,
)

from persona_agent.conversations.keys import owner_expression
from persona_agent.conversations.message_tables import messages_table, swipes_table
from persona_agent.conversations.summary_store import summaries_table
from persona_agent.db import GroupCommitWriter, tasks_table
from persona_agent.knowledge.document_store import document_chunks_table, documents_table
from persona_agent.media.media_store import media_table
from persona_agent.memory.memory_table import memories_table

__all__ = ["DOCUMENT_GRACE_SECONDS", "Retention", "RetentionLimits", "fair_level"]

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
    """Bytes of a caller's messages kept at most (``PERSONA_AGENT_CALLER_MAX_MESSAGE_BYTES``)."""
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
        """Each caller's oldest messages over its budget, then over the fair level of the
        hub's limits (see the module's docstring), in one statement for every caller."""
        limits = self.limits
        usage = await self._usage()
        counts = {str(owner): int(n) for owner, n, _ in usage}
        sizes = {str(owner): int(size) for owner, _, size in usage}
        held = {owner for owner in counts if owner or limits.anonymous_is_a_caller}
        count_budget, size_budget = limits.caller_message_max_count, limits.caller_message_max_bytes
        count_level = fair_level(_budgets(counts, held, count_budget), limits.message_max_count)
        size_level = fair_level(_budgets(sizes, held, size_budget), limits.message_max_bytes)
        # Every caller over the level keeps the level (and a held one its budget).
        row = {
            "held_count": _lowest(count_budget, count_level),
            "held_size": _lowest(size_budget, size_level),
            "anonymous_count": _lowest(count_level),
            "anonymous_size": _lowest(size_level),
        }
        if limits.anonymous_is_a_caller:
            row["anonymous_count"], row["anonymous_size"] = row["held_count"], row["held_size"]
        kind = {owner: "anonymous" if owner == "" else "held" for owner in counts}
        over = [
            o
            for o in sorted(counts)
            if counts[o] > row[f"{kind[o]}_count"] or sizes[o] > row[f"{kind[o]}_size"]
        ]
        if over:
            named = {f"owner_{i}": o for i, o in enumerate(over)} if len(over) <= _MAX_NAMED else {}
            await self._db.write(_trim(over), [{**row, **named}])

    async def _usage(self) -> list[tuple[Any, ...]]:
        """Each caller's (owner part's) messages and their bytes: by conversation first
        (in the order of the conversations' index), then by caller."""
        m = messages_table.c
        conversations = (
            select(
                m.conversation,
                func.count().label("n"),
                func.coalesce(func.sum(func.length(m.message)), 0).label("size"),
            )
            .group_by(m.conversation)
            .subquery("conversations")
        )
        owned = select(
            owner_expression(conversations.c.conversation).label("owner"),
            conversations.c.n,
            conversations.c.size,
        ).subquery("owned")
        query = select(owned.c.owner, func.sum(owned.c.n), func.sum(owned.c.size)).group_by(
            owned.c.owner
        )
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


def fair_level(wants: dict[str, int], total: int) -> int | None:
    """The most each of ``wants`` may keep so that together they keep ``total`` at most
    (0: no limit): ``None`` if all fit, else the level L where those under L keep all
    and those over it keep L (water-filling). L is at least ``total`` divided by the
    number of callers: a caller within that share is never cut."""
    if total <= 0 or sum(wants.values()) <= total:
        return None
    left = total
    ordered = sorted(wants.values())
    for index, want in enumerate(ordered):
        level = left // (len(ordered) - index)
        if want > level:
            return level
        left -= want
    return None  # not reached: the wants did not fit


def _budgets(wants: dict[str, int], held: set[str], budget: int) -> dict[str, int]:
    """``wants``, each of ``held`` lowered to ``budget`` (0: none)."""
    if budget <= 0:
        return dict(wants)
    return {owner: min(want, budget) if owner in held else want for owner, want in wants.items()}


_UNLIMITED = 2**62
_MAX_NAMED = 500
"""Callers a trim names (one parameter each), at most."""


def _lowest(*limits: int | None) -> int:
    """The lowest of ``limits`` that are set (neither ``None`` nor 0)."""
    return min((limit for limit in limits if limit), default=_UNLIMITED)


def _trim(owners: list[str]) -> Delete:
    """Delete the oldest messages of each of ``owners`` beyond its newest ``:held_count``
    whose bytes add up to ``:held_size`` at most (the anonymous conversations together:
    ``:anonymous_count`` and ``:anonymous_size``): one scan of the messages, and a sort
    of those owners', whatever their number."""
    m = messages_table.c
    owner = owner_expression(m.conversation)
    rows = select(m.seq, m.message, owner.label("owner"))
    if len(owners) <= _MAX_NAMED:  # else every caller's: those within the targets keep all
        rows = rows.where(owner.in_([bindparam(f"owner_{i}") for i in range(len(owners))]))
    owned = rows.subquery("owned")
    newest_first = owned.c.seq.desc()
    ranked = select(
        owned.c.seq,
        owned.c.owner,
        func.sum(func.length(owned.c.message))
        .over(partition_by=owned.c.owner, order_by=newest_first)
        .label("total"),
        func.row_number().over(partition_by=owned.c.owner, order_by=newest_first).label("n"),
    ).subquery("ranked")
    anonymous = ranked.c.owner == literal_column("''")
    over = or_(
        and_(
            anonymous,
            or_(
                ranked.c.n > bindparam("anonymous_count"),
                ranked.c.total > bindparam("anonymous_size"),
            ),
        ),
        and_(
            ~anonymous,
            or_(ranked.c.n > bindparam("held_count"), ranked.c.total > bindparam("held_size")),
        ),
    )
    return delete(messages_table).where(m.seq.in_(select(ranked.c.seq).where(over)))


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
