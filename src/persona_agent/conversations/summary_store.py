"""Running summaries in the hub's database: one row per conversation (``pa_summaries``),
and the conversation's messages that have left its window (``pa_messages``).

The summary is the conversation's: keyed by its key, it covers its messages up to a
``seq``, and a change of branch before that drops it in the same transaction
(:mod:`.branches`); :mod:`persona_agent.memory.summary` writes it.

Durable and shared: replicas on one PostgreSQL database read and update the same rows.
A summary is written only over the one it was made from (compare and set on
``upto_seq``), so two replicas summarizing a conversation at once cannot undo each
other's work: the later write is dropped, and nothing is lost (the next turn goes on
from the summary that stands).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from persona_agent.db import GroupCommitWriter, Sql

__all__ = ["Evicted", "Summary", "SummaryStore", "forget_persona_summaries"]

_SUMMARIES = "pa_summaries"
"""Each conversation's running summary (:mod:`.summary_table`)."""
_MESSAGES = "pa_messages"

_FORGET = Sql(
    f"DELETE FROM {_SUMMARIES} WHERE {_SUMMARIES}.persona_id = :persona_id", table=_SUMMARIES
)
_SELECT = Sql(
    f"SELECT {_SUMMARIES}.text, {_SUMMARIES}.upto_seq FROM {_SUMMARIES} "
    f"WHERE {_SUMMARIES}.conversation = :conversation",
    table=_SUMMARIES,
)
# Never fails (a failed statement would fail its whole group commit): a row that is there
# already is updated only if it is still the summary this one was made from.
_SAVE = Sql(
    f"INSERT INTO {_SUMMARIES} (conversation, persona_id, owner, text, upto_seq, at_ms) "
    "VALUES (:conversation, :persona_id, :owner, :text, :upto_seq, :at_ms) "
    "ON CONFLICT (conversation) DO UPDATE SET text = excluded.text, "
    "upto_seq = excluded.upto_seq, at_ms = excluded.at_ms "
    f"WHERE {_SUMMARIES}.upto_seq = :previous_seq",
    table=_SUMMARIES,
)
_NEWEST = Sql(
    f"SELECT {_MESSAGES}.seq, {_MESSAGES}.message FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = :conversation ORDER BY {_MESSAGES}.seq DESC "
    "LIMIT :limit",
    table=_MESSAGES,
)
_BETWEEN = Sql(
    f"SELECT {_MESSAGES}.seq, {_MESSAGES}.message FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = :conversation AND {_MESSAGES}.seq > :after "
    f"AND {_MESSAGES}.seq < :before ORDER BY {_MESSAGES}.seq LIMIT :limit",
    table=_MESSAGES,
)


@dataclass(frozen=True, slots=True)
class Summary:
    """A conversation's summary, and the last message (``pa_messages.seq``) it covers."""

    text: str = ""
    upto_seq: int = 0


@dataclass(frozen=True, slots=True)
class Evicted:
    """A message that has left the window: its ``pa_messages.seq`` and the message."""

    seq: int
    message: dict[str, Any]


class SummaryStore:
    """Rows of ``pa_summaries``, written in the database's group commit."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer

    async def get(self, conversation: str) -> Summary:
        """The conversation's summary (an empty one when it has none)."""
        rows = await self._db.fetch(_SELECT, {"conversation": conversation})
        return Summary(rows[0][0], int(rows[0][1])) if rows else Summary()

    async def save(
        self,
        conversation: str,
        *,
        persona_id: str,
        owner: str,
        summary: Summary,
        previous: Summary,
    ) -> None:
        """Write ``summary`` in place of ``previous`` (dropped if another was written since)."""
        row = {
            "conversation": conversation,
            "persona_id": persona_id,
            "owner": owner,
            "text": summary.text,
            "upto_seq": summary.upto_seq,
            "at_ms": int(time.time() * 1000),
            "previous_seq": previous.upto_seq,
        }
        await self._db.write(_SAVE, [row])

    async def window_start(self, conversation: str, max_messages: int) -> int | None:
        """The ``seq`` of the first message in the conversation's window (as
        :func:`~persona_agent.chat.history.trim_history` cuts it: the last ``max_messages``,
        from a user message on); ``None`` while no message has left the window."""
        rows = await self._db.fetch(
            _NEWEST, {"conversation": conversation, "limit": max_messages + 1}
        )
        if len(rows) <= max_messages:
            return None
        tail = list(reversed(rows[:max_messages]))
        for seq, message in tail:
            if json.loads(message).get("role") == "user":
                return int(seq)
        return int(tail[-1][0]) + 1  # no user message in the window: every one has left it

    async def evicted(
        self, conversation: str, after: int, before: int, limit: int
    ) -> list[Evicted]:
        """The conversation's messages after ``after`` and before ``before`` (seqs), oldest
        first, at most ``limit``."""
        parameters = {"conversation": conversation, "after": after, "before": before}
        rows = await self._db.fetch(_BETWEEN, {**parameters, "limit": limit})
        return [Evicted(int(seq), json.loads(message)) for seq, message in rows]


async def forget_persona_summaries(writer: GroupCommitWriter, persona_id: str) -> None:
    """Delete the summaries of a persona's conversations (it was deleted)."""
    await writer.write(_FORGET, [{"persona_id": persona_id}])
