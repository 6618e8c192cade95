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
from sqlalchemy import Select, bindparam, delete, func, insert, literal_column, select, text

from persona_agent.conversations.message_tables import messages_table
from persona_agent.conversations.prompt_table import prompts_table
from persona_agent.db import GroupCommitWriter

__all__ = ["PromptStore"]

_P = prompts_table.c
_M = messages_table.c
_PROMPTS = prompts_table.name
_MESSAGES = messages_table.name


class PromptStore:
    """The prompt records of answers: at most ``keep`` per conversation (0: none kept)."""

    def __init__(self, writer: GroupCommitWriter, *, keep: int = 20) -> None:
        self.keep_last = keep
        self._db = writer
        newest: Select[Any, Any, Any, Any] = (
            select(bindparam("c"), func.max(_M.seq), bindparam("record"), bindparam("at"))
            .where(_M.conversation == bindparam("c"))
            .having(func.max(_M.seq).is_not(None))
        )
        self._insert = insert(prompts_table).from_select(
            ["conversation", "message_id", "record", "created_ms"], newest
        )
        # Older records than the last ``keep``, and those of messages no longer there.
        self._trim = text(
            f"DELETE FROM {_PROMPTS} WHERE conversation = :c AND (message_id NOT IN (SELECT "
            f"message_id FROM {_PROMPTS} WHERE conversation = :c ORDER BY message_id DESC "
            f"LIMIT {int(keep)}) OR NOT EXISTS (SELECT 1 FROM {_MESSAGES} WHERE "
            f"{_MESSAGES}.conversation = {_PROMPTS}.conversation AND "
            f"{_MESSAGES}.seq = {_PROMPTS}.message_id))"
        )
        self._orphans = text(
            f"DELETE FROM {_PROMPTS} WHERE NOT EXISTS (SELECT 1 FROM {_MESSAGES} WHERE "
            f"{_MESSAGES}.conversation = {_PROMPTS}.conversation AND "
            f"{_MESSAGES}.seq = {_PROMPTS}.message_id)"
        )
        self._replace = delete(prompts_table).where(
            _P.conversation == bindparam("c"),
            _P.message_id
            == select(func.max(_M.seq)).where(_M.conversation == bindparam("c")).scalar_subquery(),
        )

    async def prune(self) -> None:
        """Delete the records whose answer is gone (retention deleted its messages): after
        each retention sweep."""
        await self._db.write(self._orphans, [{}])

    async def put(self, conversation: str, record: dict[str, Any], *, new: bool = False) -> None:
        """Keep ``record`` for the conversation's newest message (its answer), in place of
        one it had (a continuation's), and trim the conversation's to the last ``keep``.
        ``new``: the conversation was begun by this answer's turn (its id minted for it), so
        it has no other record: none to replace or trim."""
        if self.keep_last <= 0:
            return
        row = {"c": conversation, "record": _dumped(record), "at": int(time.time() * 1000)}
        if new:
            await self._db.write(self._insert, [row])
            return
        await self._db.write_together(
            [
                (self._replace, [{"c": conversation}]),
                (self._insert, [row]),
                (self._trim, [{"c": conversation}]),
            ]
        )

    async def get(self, conversation: str, message_id: int) -> dict[str, Any] | None:
        """The record of the answer ``message_id`` of ``conversation`` (``None``: none, or
        the message is gone)."""
        rows = await self._db.fetch(
            select(_P.record).where(
                _P.conversation == bindparam("c"),
                _P.message_id == bindparam("m"),
                select(literal_column("1"))
                .where(_M.conversation == _P.conversation, _M.seq == _P.message_id)
                .exists(),
            ),
            {"c": conversation, "m": message_id},
        )
        return json.loads(rows[0][0]) if rows else None

    async def latest(self, conversation: str) -> tuple[int, dict[str, Any]] | None:
        """The newest record of ``conversation`` and its answer's id (``None``: none)."""
        rows = await self._db.fetch(
            select(_P.message_id, _P.record)
            .where(
                _P.conversation == bindparam("c"),
                select(literal_column("1"))
                .where(_M.conversation == _P.conversation, _M.seq == _P.message_id)
                .exists(),
            )
            .order_by(_P.message_id.desc())
            .limit(1),
            {"c": conversation},
        )
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
