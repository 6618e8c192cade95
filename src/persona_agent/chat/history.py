"""Conversation history: a bounded LRU in memory over a durable table.

Each conversation (``{persona_id}:{context_id}``) is a list of chat messages
in the OpenAI format. Every turn is written to the database when it completes,
so a restart continues the conversation; only the most recent
``cache_size`` conversations stay in memory, each cut to its last
``max_messages`` messages (the model sees no more than that either).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Sequence

from persona_agent.db import GroupCommitWriter, Sql, like_escaped
from persona_agent.llm.base import Message

__all__ = ["ConversationHistory", "trim_history"]

_INSERT = Sql(
    "INSERT INTO pa_messages (conversation, message, at_ms) "
    "VALUES (:conversation, :message, :at_ms)",
    table="pa_messages",
)
_SELECT = Sql(
    "SELECT pa_messages.message FROM pa_messages "
    "WHERE pa_messages.conversation = :conversation "
    "ORDER BY pa_messages.seq DESC LIMIT :limit",
    table="pa_messages",
)
_CONVERSATION_TABLES = ("pa_messages", "pa_swipes", "pa_media", "pa_prompts")
"""Where a conversation's rows are: its messages, its answers' alternatives, its images,
its prompts (they all go with it)."""
_DELETE_PREFIXED = tuple(
    Sql(f"DELETE FROM {table} WHERE {table}.conversation LIKE :prefix", table=table)
    for table in _CONVERSATION_TABLES
)
_DELETE_CONVERSATION = tuple(
    Sql(f"DELETE FROM {table} WHERE {table}.conversation = :conversation", table=table)
    for table in _CONVERSATION_TABLES
)
_CALLER_KEYS = {
    table: Sql(
        f"SELECT {table}.conversation, count(*) FROM {table} "
        f"WHERE {table}.conversation LIKE :pattern ESCAPE '\\' GROUP BY {table}.conversation",
        table=table,
    )
    for table in ("pa_messages", "pa_swipes")
}
"""Each conversation of the table whose key matches ``:pattern``, and its rows."""


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


_Entry = tuple[list[Message], int, bool]
"""A conversation in memory: its window's messages, their size, whether older ones were
left out."""

_MESSAGE_OVERHEAD = 200
"""Bytes a message costs in memory beyond its text (its dict, keys, role), roughly."""


def _size(messages: Sequence[Message]) -> int:
    """What a conversation's messages cost in memory, roughly: their text and overhead."""
    total = 0
    for message in messages:
        content = message.get("content")
        total += _MESSAGE_OVERHEAD + (len(content) if isinstance(content, str) else 0)
        for call in message.get("tool_calls") or ():
            total += len(str(call))
    return total


class ConversationHistory:
    """Conversations by key: the recent ones in memory (at most ``cache_size`` of them and
    ``cache_bytes`` of their text), every turn in the database."""

    def __init__(
        self,
        writer: GroupCommitWriter,
        *,
        cache_size: int = 200,
        max_messages: int = 50,
        cache_bytes: int = 64 * 1024 * 1024,
        shared: bool = False,
    ):
        """``shared``: other replicas add turns to the same conversations, so every load
        reads the database (under the conversation's lock, which spans replicas)."""
        self._shared = shared
        self._db = writer
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._cache_size = cache_size
        self._cache_bytes = cache_bytes
        self._bytes = 0
        self._max_messages = max_messages

    @property
    def writer(self) -> GroupCommitWriter:
        """The database's way in, which the history writes through."""
        return self._db

    @property
    def cached_bytes(self) -> int:
        """What the conversations in memory cost, roughly (see ``cache_bytes``)."""
        return self._bytes

    async def forget_persona(self, persona_id: str) -> None:
        """Delete every conversation of a persona, in memory and in the database (it was
        deleted: a new persona with its id must not continue them)."""
        prefix = f"{persona_id}:"
        for conversation in [key for key in self._cache if key.startswith(prefix)]:
            self._bytes -= self._cache.pop(conversation)[1]
        await self._db.write_together(
            [(statement, [{"prefix": f"{prefix}%"}]) for statement in _DELETE_PREFIXED]
        )

    async def forget_caller(self, prefix: str) -> tuple[int, int]:
        """Delete every conversation whose key, after the persona's id, starts with
        ``prefix`` (an identified caller's: ``@{caller}:``), in memory and in the database;
        how many conversations and messages there were.

        A scan of the messages (the key's persona part comes first): rare, on request."""
        found = await self._caller_keys("pa_messages", prefix)
        # An answer's alternatives (conversations/store.py) go with their conversation.
        keys = set(found) | set(await self._caller_keys("pa_swipes", prefix))
        for conversation in keys:
            self.drop(conversation)
        if keys:
            rows = [{"conversation": key} for key in sorted(keys)]
            await self._db.write_together([(statement, rows) for statement in _DELETE_CONVERSATION])
        return len(found), sum(found.values())

    async def _caller_keys(self, table: str, prefix: str) -> dict[str, int]:
        """The conversations of ``table`` whose key, after the persona's id, starts with
        ``prefix``, and how many rows each has."""
        pattern = "%:" + like_escaped(prefix) + "%"
        rows = await self._db.fetch(_CALLER_KEYS[table], {"pattern": pattern})
        # LIKE matches the prefix anywhere (and, on SQLite, in any case): keep exact ones.
        return {key: int(count) for key, count in rows if key.partition(":")[2].startswith(prefix)}

    def drop(self, conversation: str) -> None:
        """Forget a conversation in memory (it was changed in the database: the next load
        reads it there)."""
        entry = self._cache.pop(conversation, None)
        if entry is not None:
            self._bytes -= entry[1]

    @property
    def cached_conversations(self) -> int:
        return len(self._cache)

    @property
    def max_messages(self) -> int:
        """The window: the most messages of a conversation a prompt shows."""
        return self._max_messages

    async def load(self, conversation: str) -> list[Message]:
        """The recent messages of a conversation (a copy: callers may extend it)."""
        return (await self.window(conversation))[0]

    async def window(self, conversation: str, *, new: bool = False) -> tuple[list[Message], bool]:
        """The recent messages of a conversation (a copy), and whether older ones were left
        out (the window is full: :meth:`max_messages`). ``new``: the conversation was begun
        by the turn asking (its id minted for it), so none are stored: none are read."""
        if new:
            if not self._shared:
                self._remember(conversation, [], False)  # its turn's append adds to it
            return [], False
        if self._shared:
            return await self._read(conversation)
        entry = self._cache.get(conversation)
        if entry is None:
            cached, cut = await self._read(conversation)
            self._remember(conversation, cached, cut)
            return list(cached), cut
        self._cache.move_to_end(conversation)
        return list(entry[0]), entry[2]

    async def append(self, conversation: str, messages: Sequence[Message]) -> None:
        """Durably add a completed turn to a conversation (in the database's group commit)."""
        if not messages:
            return
        at_ms = int(time.time() * 1000)
        await self._db.write(
            _INSERT,
            [
                {"conversation": conversation, "message": json.dumps(m), "at_ms": at_ms}
                for m in messages
            ],
        )
        if self._shared:
            return
        entry = self._cache.get(conversation)
        if entry is None:
            self._remember(conversation, *await self._read(conversation))
        else:
            self._remember(conversation, entry[0] + list(messages), entry[2])

    async def _read(self, conversation: str) -> tuple[list[Message], bool]:
        """The window's messages, and whether older ones were left out (one row more than
        the window is read to tell)."""
        rows = await self._db.fetch(
            _SELECT, {"conversation": conversation, "limit": self._max_messages + 1}
        )
        messages = [json.loads(row[0]) for row in reversed(rows)]
        trimmed = trim_history(messages, self._max_messages)
        return trimmed, len(trimmed) < len(messages)

    def _remember(self, conversation: str, messages: list[Message], cut: bool) -> None:
        trimmed = trim_history(messages, self._max_messages)
        size = _size(trimmed)
        previous = self._cache.pop(conversation, None)
        if previous is not None:
            self._bytes -= previous[1]
        self._cache[conversation] = (trimmed, size, cut or len(trimmed) < len(messages))
        self._bytes += size
        # The oldest go first; the one just used stays, even if it alone is over the bound.
        while len(self._cache) > 1 and (
            len(self._cache) > self._cache_size or self._bytes > self._cache_bytes
        ):
            self._bytes -= self._cache.popitem(last=False)[1][1]
