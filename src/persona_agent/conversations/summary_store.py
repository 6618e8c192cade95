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
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    String,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    select,
)

from persona_agent.conversations.message_tables import messages_table
from persona_agent.db import GroupCommitWriter, metadata

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

__all__ = ["Evicted", "Summary", "SummaryStore", "forget_persona_summaries", "summaries_table"]

summaries_table = Table(
    "pa_summaries",
    metadata,
    Column("conversation", String(300), primary_key=True),  # the key, as in pa_messages
    Column("persona_id", String(63), nullable=False),
    Column("owner", String(200), nullable=False),  # the identified caller; "" anonymous
    Column("text", Text, nullable=False),
    Column("upto_seq", BigInteger, nullable=False),  # the last pa_messages.seq it covers
    Column("at_ms", BigInteger, nullable=False),  # ms since the epoch
    Index("ix_pa_summaries_persona", "persona_id"),
)
"""Each conversation's running summary of the messages that left its window."""

_FORGET = delete(summaries_table).where(summaries_table.c.persona_id == bindparam("persona_id"))


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
        c = summaries_table.c
        self._select = select(c.text, c.upto_seq).where(c.conversation == bindparam("conversation"))
        # Only the dialect in use is imported: PostgreSQL's costs ~4 MB of memory.
        upsert: postgresql.Insert | sqlite.Insert
        if writer.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            upsert = pg_insert(summaries_table)
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            upsert = sqlite_insert(summaries_table)
        # Never fails (a failed statement would fail its whole group commit): a row that is
        # there already is updated only if it is still the summary this one was made from.
        self._save = upsert.on_conflict_do_update(
            index_elements=["conversation"],
            set_={k: upsert.excluded[k] for k in ("text", "upto_seq", "at_ms")},
            where=c.upto_seq == bindparam("previous_seq"),
        )
        m = messages_table.c
        self._newest = (
            select(m.seq, m.message)
            .where(m.conversation == bindparam("conversation"))
            .order_by(m.seq.desc())
            .limit(bindparam("limit"))
        )
        self._between = (
            select(m.seq, m.message)
            .where(
                and_(
                    m.conversation == bindparam("conversation"),
                    m.seq > bindparam("after"),
                    m.seq < bindparam("before"),
                )
            )
            .order_by(m.seq)
            .limit(bindparam("limit"))
        )

    async def get(self, conversation: str) -> Summary:
        """The conversation's summary (an empty one when it has none)."""
        rows = await self._db.fetch(self._select, {"conversation": conversation})
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
        await self._db.write(self._save, [row])

    async def window_start(self, conversation: str, max_messages: int) -> int | None:
        """The ``seq`` of the first message in the conversation's window (as
        :func:`~persona_agent.chat.history.trim_history` cuts it: the last ``max_messages``,
        from a user message on); ``None`` while no message has left the window."""
        rows = await self._db.fetch(
            self._newest, {"conversation": conversation, "limit": max_messages + 1}
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
        rows = await self._db.fetch(self._between, {**parameters, "limit": limit})
        return [Evicted(int(seq), json.loads(message)) for seq, message in rows]


async def forget_persona_summaries(writer: GroupCommitWriter, persona_id: str) -> None:
    """Delete the summaries of a persona's conversations (it was deleted)."""
    await writer.write(_FORGET, [{"persona_id": persona_id}])
