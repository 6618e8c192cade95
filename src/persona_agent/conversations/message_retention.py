"""Conversations kept within the storage limits: each caller's oldest messages deleted
past its own budget, then past its fair share of the hub's limit; and, with a
conversation's last message, what this package keeps beside it (its running summary, the
alternatives of its answers). Run by the retention sweep (:mod:`persona_agent.retention`).

Messages are kept per caller first (docs/conversations.md, "Storage quotas"): a caller
over its own budget (``caller_max_*``) loses its own oldest messages; then, if the hub's
limit is still passed, it is shared out fairly (:func:`fair_level`): the callers over the
fair level lose their oldest down to it, and a caller under the hub's limit divided by
the number of callers loses nothing. One caller's growth never deletes another's
messages. Every anonymous conversation is one caller's (the keys do not tell anonymous
callers apart: :func:`~persona_agent.conversations.keys.owner_expression`); on a hub that
identifies nobody (``anonymous_is_a_caller`` false) it is the hub's only caller and has no
budget of its own. The caller's quota on writes is the same budget, checked as it grows
(:mod:`.storage_quota`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Delete, and_, bindparam, delete, func, literal_column, or_, select, text

from persona_agent.conversations.keys import owner_expression
from persona_agent.conversations.message_tables import messages_table, swipes_table
from persona_agent.conversations.summary_store import summaries_table
from persona_agent.db import GroupCommitWriter

__all__ = ["MessageLimits", "MessageRetention", "fair_level"]

_MESSAGES = messages_table.name
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


@dataclass(frozen=True, slots=True)
class MessageLimits:
    """The messages kept; 0: no limit."""

    max_count: int = 1_000_000
    max_bytes: int = 1024**3
    caller_max_count: int = 0
    """A caller's messages kept at most (``PERSONA_AGENT_CALLER_MAX_MESSAGES``)."""
    caller_max_bytes: int = 0
    """Bytes of a caller's messages kept at most (``PERSONA_AGENT_CALLER_MAX_MESSAGE_BYTES``)."""
    anonymous_is_a_caller: bool = True
    """Whether the anonymous conversations are held to the caller budgets (false on a hub
    that identifies nobody: they are all it keeps)."""

    @property
    def limited(self) -> bool:
        return bool(
            self.max_count or self.max_bytes or self.caller_max_count or self.caller_max_bytes
        )


class MessageRetention:
    """Deletes the messages over the limits, then what went with the last message of a
    conversation: each a statement in the database's group commit."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer

    async def sweep(self, limits: MessageLimits) -> None:
        """The messages over ``limits`` (the oldest first), then the summaries and
        alternatives whose messages are gone (nothing when no limit is set)."""
        if not limits.limited:
            return
        await self._trim(limits)
        await self._db.write(_ORPHAN_SUMMARIES, [{}])
        await self._db.write(_ORPHAN_SWIPES, [{}])

    async def _trim(self, limits: MessageLimits) -> None:
        """Each caller's oldest messages over its budget, then over the fair level of the
        hub's limits (the module's docstring), in one statement for every caller."""
        usage = await self._usage()
        counts = {str(owner): int(n) for owner, n, _ in usage}
        sizes = {str(owner): int(size) for owner, _, size in usage}
        held = {owner for owner in counts if owner or limits.anonymous_is_a_caller}
        count_budget, size_budget = limits.caller_max_count, limits.caller_max_bytes
        count_level = fair_level(_budgets(counts, held, count_budget), limits.max_count)
        size_level = fair_level(_budgets(sizes, held, size_budget), limits.max_bytes)
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
            await self._db.write(_trimmed(over), [{**row, **named}])

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


def _trimmed(owners: list[str]) -> Delete:
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
