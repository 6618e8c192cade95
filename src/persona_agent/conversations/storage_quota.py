"""A caller's storage quota: how many conversations, messages and bytes of them it may keep,
checked before a write that adds to them (docs/conversations.md, "Storage quotas").

A caller is the owner part of a conversation's key
(:func:`~persona_agent.conversations.keys.owner_part`): an identified caller, or every
anonymous conversation together (on a hub that identifies
nobody those are all the hub keeps, and only the hub's retention limits hold them). What a
caller keeps is counted from the database (a scan of the conversations' keys), at most once
every ``refresh_seconds`` per caller; between two counts, the writes checked here are added
to the count, and a deletion makes the next check count again. So the count is exact
after a deletion and at most ``refresh_seconds`` behind what other doors (an A2A turn
appending its exchange) or other replicas wrote: the retention sweep's per-caller budgets
(:mod:`persona_agent.retention`) hold a caller that passed the quota meanwhile.

An alternative of an answer counts as one message, its messages' JSON as its bytes.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from persona_agent.conversations.keys import owned_by_sql, owner_part
from persona_agent.db import GroupCommitWriter, Sql, like_escaped
from persona_agent.errors import StorageQuotaError
from persona_agent.llm.base import Message

__all__ = ["NO_QUOTA", "StorageLimits", "StorageQuota", "Stored", "stored_size"]

MAX_CALLERS = 10_000
"""Callers whose counts are kept in memory (the least recently checked are counted again)."""


@dataclass(frozen=True, slots=True)
class StorageLimits:
    """What one caller may keep; 0: no limit. Settings:
    ``PERSONA_AGENT_CALLER_MAX_CONVERSATIONS``, ``PERSONA_AGENT_CALLER_MAX_MESSAGES``,
    ``PERSONA_AGENT_CALLER_MAX_MESSAGE_BYTES``."""

    conversations: int = 0
    messages: int = 0
    bytes: int = 0
    anonymous_is_a_caller: bool = True
    """Whether the anonymous conversations are held to these limits (false on a hub that
    identifies nobody)."""

    @property
    def any(self) -> bool:
        return bool(self.conversations or self.messages or self.bytes)


@dataclass(frozen=True, slots=True)
class Stored:
    """What a caller keeps, or what a write adds to it."""

    conversations: int = 0
    messages: int = 0
    bytes: int = 0

    def __add__(self, other: Stored) -> Stored:
        return Stored(
            self.conversations + other.conversations,
            self.messages + other.messages,
            self.bytes + other.bytes,
        )

    def __neg__(self) -> Stored:
        return Stored(-self.conversations, -self.messages, -self.bytes)


def stored_size(
    messages: Sequence[Message],
    swipes: Mapping[int, Sequence[Sequence[Message] | None]] | None = None,
) -> Stored:
    """What a new conversation of ``messages`` and alternatives ``swipes`` adds."""
    alternatives = [a for options in (swipes or {}).values() for a in options if a is not None]
    return Stored(
        1,
        len(messages) + len(alternatives),
        sum(len(json.dumps(m)) for m in messages) + sum(len(json.dumps(a)) for a in alternatives),
    )


_MESSAGES = "pa_messages"
_SWIPES = "pa_swipes"


def _counted(owner: str, dialect: str) -> tuple[Sql, Sql, dict[str, Any]]:
    """The queries of what ``owner`` keeps on ``dialect`` (its messages; its alternatives
    of answers), and their parameters but ``:pattern``: a LIKE first, cheaper than the
    exact test, which it leaves few rows to."""
    mine, parameters = owned_by_sql(f"{_MESSAGES}.conversation", owner, dialect)
    theirs, _ = owned_by_sql(f"{_SWIPES}.conversation", owner, dialect)
    messages = Sql(
        f"SELECT count(distinct({_MESSAGES}.conversation)), count(*), "
        f"coalesce(sum(length({_MESSAGES}.message)), 0) FROM {_MESSAGES} "
        f"WHERE {_MESSAGES}.conversation LIKE :pattern ESCAPE '\\' AND {mine}",
        table=_MESSAGES,
    )
    alternatives = Sql(
        f"SELECT count({_SWIPES}.messages), coalesce(sum(length({_SWIPES}.messages)), 0) "
        f"FROM {_SWIPES} WHERE {_SWIPES}.conversation LIKE :pattern ESCAPE '\\' "
        f"AND {theirs}",
        table=_SWIPES,
    )
    return messages, alternatives, parameters


class StorageQuota:
    """The counts behind the limits (one per hub; with no limits, each check returns at
    once)."""

    def __init__(
        self,
        writer: GroupCommitWriter | None,
        limits: StorageLimits,
        *,
        refresh_seconds: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self._db = writer
        self._refresh = refresh_seconds
        self._clock = clock
        self._counts: OrderedDict[str, tuple[Stored, float]] = OrderedDict()

    def _held(self, owner: str) -> bool:
        return self.limits.any and (bool(owner) or self.limits.anonymous_is_a_caller)

    async def stored(self, owner: str) -> Stored:
        """What ``owner`` (an owner part) keeps: counted, or the count kept since."""
        found = self._counts.get(owner)
        now = self._clock()
        if found is not None and now - found[1] < self._refresh:
            self._counts.move_to_end(owner)
            return found[0]
        counted = await self._count(owner)
        self._counts[owner] = (counted, now)
        self._counts.move_to_end(owner)
        while len(self._counts) > MAX_CALLERS:
            self._counts.popitem(last=False)
        return counted

    async def _count(self, owner: str) -> Stored:
        if self._db is None:
            return Stored()
        pattern = "%:" + like_escaped(owner) + "%" if owner else "%"
        query, alternatives, parameters = _counted(owner, self._db.dialect)
        parameters["pattern"] = pattern
        [(conversations, messages, size)] = await self._db.fetch(query, parameters)
        [(others, other_size)] = await self._db.fetch(alternatives, parameters)
        return Stored(int(conversations), int(messages) + int(others), int(size) + int(other_size))

    @asynccontextmanager
    async def adding(self, key: str, added: Stored) -> AsyncIterator[None]:
        """Check that the caller of conversation ``key`` may keep ``added`` more, and count
        it while the block writes it (taken back if the block fails).

        Raises:
            StorageQuotaError: it would keep more than a limit allows (nothing is counted).
        """
        owner = owner_part(key)
        if not self._held(owner):
            yield
            return
        _check(await self.stored(owner), added, self.limits)
        self._add(owner, added)
        try:
            yield
        except BaseException:
            self._add(owner, -added)
            raise

    def changed(self, key: str) -> None:
        """Conversation ``key`` lost messages: its caller is counted again at its next check."""
        self._counts.pop(owner_part(key), None)

    def _add(self, owner: str, added: Stored) -> None:
        found = self._counts.get(owner)
        if found is not None:
            self._counts[owner] = (found[0] + added, found[1])


NO_QUOTA = StorageQuota(None, StorageLimits())
"""No limits: every check passes without a query."""


def _check(stored: Stored, added: Stored, limits: StorageLimits) -> None:
    after = stored + added
    for what, limit, before, now, setting in (
        (
            "conversations",
            limits.conversations,
            stored.conversations,
            after.conversations,
            "CONVERSATIONS",
        ),
        ("messages", limits.messages, stored.messages, after.messages, "MESSAGES"),
        ("bytes of messages", limits.bytes, stored.bytes, after.bytes, "MESSAGE_BYTES"),
    ):
        if limit and now > limit and now > before:
            raise StorageQuotaError(
                f"The caller keeps {before:,} {what}; this would make {now:,}, over its limit "
                f"of {limit:,} (PERSONA_AGENT_CALLER_MAX_{setting}). Delete conversations "
                "to make room"
            )
