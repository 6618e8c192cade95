"""Conversation history: a bounded LRU in memory over a durable table.

Each conversation (``{persona_id}:{context_id}``) is a list of chat messages
in the OpenAI format. Every turn is written to the database when it completes,
so a restart continues the conversation; only the most recent
``cache_size`` conversations stay in memory, each cut to its last
``max_messages`` messages (the model sees no more than that either).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.db import database, messages_table
from persona_agent.llm.base import Message

__all__ = ["ConversationHistory", "trim_history"]


def trim_history(messages: Sequence[Message], max_messages: int) -> list[Message]:
    """The last ``max_messages`` messages, starting at a user message.

    Starting at a user message keeps a tool call and its results together:
    a history never opens with a dangling tool result.
    """
    if len(messages) <= max_messages:
        return list(messages)
    tail = list(messages[-max_messages:])
    for index, message in enumerate(tail):
        if message.get("role") == "user":
            return tail[index:]
    return []


class ConversationHistory:
    def __init__(self, engine: AsyncEngine, *, cache_size: int = 200, max_messages: int = 50):
        self._engine = engine
        self._db = database(engine)
        self._insert = insert(messages_table)
        self._cache: OrderedDict[str, list[Message]] = OrderedDict()
        self._cache_size = cache_size
        self._max_messages = max_messages

    @property
    def cached_conversations(self) -> int:
        return len(self._cache)

    async def load(self, conversation: str) -> list[Message]:
        """The recent messages of a conversation (a copy: callers may extend it)."""
        cached = self._cache.get(conversation)
        if cached is None:
            cached = await self._read(conversation)
            self._remember(conversation, cached)
        else:
            self._cache.move_to_end(conversation)
        return list(cached)

    async def append(self, conversation: str, messages: Sequence[Message]) -> None:
        """Durably add a completed turn to a conversation (in the database's group commit)."""
        if not messages:
            return
        await self._db.write(
            self._insert,
            [{"conversation": conversation, "message": json.dumps(m)} for m in messages],
        )
        current = self._cache.get(conversation)
        if current is None:
            current = await self._read(conversation)
        else:
            current = current + list(messages)
        self._remember(conversation, current)

    async def _read(self, conversation: str) -> list[Message]:
        local = self._db.query_local(
            f"SELECT message FROM {messages_table.name} WHERE conversation = ? "
            "ORDER BY seq DESC LIMIT ?",
            (conversation, self._max_messages),
        )
        if local is not None:
            rows = [row[0] for row in local]
        else:
            query = (
                select(messages_table.c.message)
                .where(messages_table.c.conversation == conversation)
                .order_by(messages_table.c.seq.desc())
                .limit(self._max_messages)
            )
            async with self._engine.connect() as conn:
                rows = list((await conn.execute(query)).scalars().all())
        return trim_history([json.loads(row) for row in reversed(rows)], self._max_messages)

    def _remember(self, conversation: str, messages: list[Message]) -> None:
        self._cache[conversation] = trim_history(messages, self._max_messages)
        self._cache.move_to_end(conversation)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
