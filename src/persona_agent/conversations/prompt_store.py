"""Where each answer's prompt record is kept (``pa_prompts``): written with the answer, the
last ``keep`` of a conversation kept, read by the conversation's owner (docs/prompt.md).

A record is keyed by the answer message it produced (``pa_messages.seq``): the turn's
messages are in the history when it is written, and the conversation's lock is held, so
the conversation's newest message is the answer (a continuation's: the answer it extended).
A record whose message was deleted is not served, and is deleted with the next record of
its conversation, with the conversation, or after the next retention sweep (:meth:`prune`).
"""

from __future__ import annotations

import json
import time
from typing import Any

import orjson

from persona_agent.db import GroupCommitWriter, Sql

__all__ = ["PromptStore"]

_PROMPTS = "pa_prompts"
"""Each answer's prompt record (:mod:`.prompt_table`)."""
_MESSAGES = "pa_messages"
_ANSWER_THERE = (
    f"EXISTS (SELECT 1 FROM {_MESSAGES} WHERE {_MESSAGES}.conversation = "
    f"{_PROMPTS}.conversation AND {_MESSAGES}.seq = {_PROMPTS}.message_id)"
)
"""The record's answer is still in its conversation."""
_INSERT = Sql(
    f"INSERT INTO {_PROMPTS} (conversation, message_id, record, created_ms) "
    f"SELECT CAST(:c AS VARCHAR), max({_MESSAGES}.seq), CAST(:record AS TEXT), "
    f"CAST(:at AS BIGINT) FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = :c HAVING max({_MESSAGES}.seq) IS NOT NULL",
    table=_PROMPTS,
)
"""The record of the conversation's newest message (none while it has no message); the
parameters cast, as PostgreSQL takes ``:c`` for text in the list and varchar after WHERE."""
_ORPHANS = Sql(f"DELETE FROM {_PROMPTS} WHERE NOT {_ANSWER_THERE}", table=_PROMPTS)
_REPLACE = Sql(
    f"DELETE FROM {_PROMPTS} WHERE {_PROMPTS}.conversation = :c AND "
    f"{_PROMPTS}.message_id = (SELECT max({_MESSAGES}.seq) FROM {_MESSAGES} "
    f"WHERE {_MESSAGES}.conversation = :c)",
    table=_PROMPTS,
)
_GET = Sql(
    f"SELECT {_PROMPTS}.record FROM {_PROMPTS} WHERE {_PROMPTS}.conversation = :c "
    f"AND {_PROMPTS}.message_id = :m AND {_ANSWER_THERE}",
    table=_PROMPTS,
)
_LATEST = Sql(
    f"SELECT {_PROMPTS}.message_id, {_PROMPTS}.record FROM {_PROMPTS} "
    f"WHERE {_PROMPTS}.conversation = :c AND {_ANSWER_THERE} "
    f"ORDER BY {_PROMPTS}.message_id DESC LIMIT 1",
    table=_PROMPTS,
)


class PromptStore:
    """The prompt records of answers: at most ``keep`` per conversation (0: none kept)."""

    def __init__(self, writer: GroupCommitWriter, *, keep: int = 20) -> None:
        self.keep_last = keep
        self._db = writer
        self._trim = Sql(
            f"DELETE FROM {_PROMPTS} WHERE conversation = :c AND (message_id NOT IN (SELECT "
            f"message_id FROM {_PROMPTS} WHERE conversation = :c ORDER BY message_id DESC "
            f"LIMIT {int(keep)}) OR NOT {_ANSWER_THERE})",
            table=_PROMPTS,
        )

    async def prune(self) -> None:
        """Delete the records whose answer is gone (retention deleted its messages): after
        each retention sweep."""
        await self._db.write(_ORPHANS, [{}])

    async def put(self, conversation: str, record: dict[str, Any], *, new: bool = False) -> None:
        """Keep ``record`` for the conversation's newest message (its answer), in place of
        one it had (a continuation's), and trim the conversation's to the last ``keep``.
        ``new``: the conversation was begun by this answer's turn (its id minted for it), so
        it has no other record: none to replace or trim."""
        if self.keep_last <= 0:
            return
        row = {"c": conversation, "record": _dumped(record), "at": int(time.time() * 1000)}
        if new:
            await self._db.write(_INSERT, [row])
            return
        await self._db.write_together(
            [
                (_REPLACE, [{"c": conversation}]),
                (_INSERT, [row]),
                (self._trim, [{"c": conversation}]),
            ]
        )

    async def get(self, conversation: str, message_id: int) -> dict[str, Any] | None:
        """The record of the answer ``message_id`` of ``conversation`` (``None``: none, or
        the message is gone)."""
        rows = await self._db.fetch(_GET, {"c": conversation, "m": message_id})
        return json.loads(rows[0][0]) if rows else None

    async def latest(self, conversation: str) -> tuple[int, dict[str, Any]] | None:
        """The newest record of ``conversation`` and its answer's id (``None``: none)."""
        rows = await self._db.fetch(_LATEST, {"c": conversation})
        return (int(rows[0][0]), json.loads(rows[0][1])) if rows else None


def _dumped(record: dict[str, Any]) -> str:
    """``record`` as JSON text: by orjson (a record holds the whole prompt, some 6 KB for a
    bundled persona: ~30 times faster than ``json.dumps``), by ``json.dumps`` (escaped) when
    a text in it is no valid Unicode (a lone surrogate a client's JSON escape made), which
    orjson refuses."""
    try:
        return orjson.dumps(record).decode()
    except TypeError:
        return json.dumps(record)
