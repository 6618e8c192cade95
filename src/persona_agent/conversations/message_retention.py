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
callers apart: :func:`~persona_agent.conversations.keys.owner_sql`); on a hub that
identifies nobody (``anonymous_is_a_caller`` false) it is the hub's only caller and has no
budget of its own. The caller's quota on writes is the same budget, checked as it grows
(:mod:`.storage_quota`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from persona_agent.conversations.keys import owner_sql
from persona_agent.db import GroupCommitWriter, Sql, in_list

__all__ = ["MessageLimits", "MessageRetention", "fair_level"]

_MESSAGES = "pa_messages"
_SWIPES = "pa_swipes"
_SUMMARIES = "pa_summaries"
_ORPHAN_SUMMARIES = Sql(
    f"DELETE FROM {_SUMMARIES} WHERE NOT EXISTS (SELECT 1 FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = {_SUMMARIES}.conversation)",
    table=_SUMMARIES,
)
"""A running summary goes with its conversation's last message (docs/memory.md)."""
_ORPHAN_SWIPES = Sql(
    f"DELETE FROM {_SWIPES} WHERE NOT EXISTS (SELECT 1 FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = {_SWIPES}.conversation AND "
    f"({_SWIPES}.anchor = 0 OR {_MESSAGES}.seq = {_SWIPES}.anchor))",
    table=_SWIPES,
)
"""An answer's alternatives go with the user message they answer (docs/conversations.md)."""


def _usage_sql(dialect: str) -> str:
    """Each caller's (owner part's) messages and their bytes: by conversation first (in
    the order of the conversations' index), then by caller."""
    return (
        "SELECT owned.owner, sum(owned.n), sum(owned.size) FROM (SELECT "
        f"{owner_sql('conversations.conversation', dialect)} AS owner, "
        "conversations.n AS n, conversations.size AS size FROM (SELECT "
        f"{_MESSAGES}.conversation AS conversation, count(*) AS n, "
        f"coalesce(sum(length({_MESSAGES}.message)), 0) AS size FROM {_MESSAGES} "
        f"GROUP BY {_MESSAGES}.conversation) AS conversations) AS owned GROUP BY owned.owner"
    )


_USAGE = Sql(_usage_sql("sqlite"), table=_MESSAGES, postgresql=_usage_sql("postgresql"))


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
            statement, named = _trimmed(over, self._db.dialect)
            await self._db.write(statement, [{**row, **named}])

    async def _usage(self) -> list[tuple[Any, ...]]:
        """Each caller's (owner part's) messages and their bytes."""
        return await self._db.fetch(_USAGE)


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


def _trimmed(owners: list[str], dialect: str) -> tuple[Sql, dict[str, Any]]:
    """Delete the oldest messages of each of ``owners`` beyond its newest ``:held_count``
    whose bytes add up to ``:held_size`` at most (the anonymous conversations together:
    ``:anonymous_count`` and ``:anonymous_size``): one scan of the messages, and a sort
    of those owners', whatever their number. The statement on ``dialect``, and its
    owners' parameters."""
    owner = owner_sql(f"{_MESSAGES}.conversation", dialect)
    where, named = "", dict[str, Any]()
    if len(owners) <= _MAX_NAMED:  # else every caller's: those within the targets keep all
        listed, named = in_list("owner", owners)
        where = f" WHERE {owner} IN {listed}"
    sql = (
        f"DELETE FROM {_MESSAGES} WHERE {_MESSAGES}.seq IN (SELECT ranked.seq FROM "
        "(SELECT owned.seq AS seq, owned.owner AS owner, sum(length(owned.message)) "
        "OVER (PARTITION BY owned.owner ORDER BY owned.seq DESC) AS total, "
        "row_number() OVER (PARTITION BY owned.owner ORDER BY owned.seq DESC) AS n "
        f"FROM (SELECT {_MESSAGES}.seq AS seq, {_MESSAGES}.message AS message, "
        f"{owner} AS owner FROM {_MESSAGES}{where}) AS owned) AS ranked "
        "WHERE ranked.owner = '' AND (ranked.n > :anonymous_count OR ranked.total > "
        ":anonymous_size) OR ranked.owner != '' AND (ranked.n > :held_count OR "
        "ranked.total > :held_size))"
    )
    return Sql(sql, table=_MESSAGES), named
