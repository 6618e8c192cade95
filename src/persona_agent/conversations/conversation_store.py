"""The stored conversations a caller steers (issue 37; docs/conversations.md): list, read
with branches, and each change under the conversation's lock, so that it never interleaves
with a turn being answered (on replicas the lock spans them); a change that adds to what
the caller keeps (a new conversation, a fork, an import, an edit) within its storage
quota (:mod:`persona_agent.conversations.storage_quota`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from persona_agent.conversations.branches import Branches, Forgetful
from persona_agent.conversations.storage_quota import NO_QUOTA, StorageQuota, Stored, stored_size
from persona_agent.conversations.view import ConversationInfo, ConversationView, final_text
from persona_agent.db import GroupCommitWriter, Sql, in_list, like_escaped
from persona_agent.errors import ConversationExistsError, ConversationNotFound, MessageNotFound
from persona_agent.llm.base import Message

__all__ = ["ConversationStore", "Locks"]


class Locks(Protocol):
    """Per-conversation locks (the engine's
    :class:`~persona_agent.chat.conversation_locks.KeyedLocks`)."""

    def hold(self, key: str) -> AbstractAsyncContextManager[None]: ...


class _NoLocks:
    def hold(self, key: str) -> AbstractAsyncContextManager[None]:
        return _nothing()


class _Nothing:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_: object) -> None:
        return None


def _nothing() -> AbstractAsyncContextManager[None]:
    return _Nothing()


_LIST = Sql(
    "SELECT pa_messages.conversation, count(*) AS count_1, max(pa_messages.seq) AS max_1, "
    "max(pa_messages.at_ms) AS max_2 FROM pa_messages "
    "WHERE pa_messages.conversation LIKE :pattern ESCAPE '\\' "
    "GROUP BY pa_messages.conversation",
    table="pa_messages",
)


class ConversationStore:
    """Conversations by key (``{persona_id}:{conversation_key(owner, context_id)}``, as the
    engine's history has them)."""

    def __init__(
        self,
        writer: GroupCommitWriter,
        history: Forgetful,
        *,
        locks: Locks | None = None,
        quota: StorageQuota = NO_QUOTA,
    ) -> None:
        self._db = writer
        self.branches = Branches(writer, history)
        """The same operations without the lock (for who holds it: the engine)."""
        self._locks: Locks = locks if locks is not None else _NoLocks()
        self.quota = quota

    async def list(self, persona_id: str, owner_prefix: str) -> list[ConversationInfo]:
        """The conversations of a caller with a persona, the latest changed first.
        ``owner_prefix``: the caller's ``conversation_key(owner, "")`` (empty: anonymous
        conversations, whose keys are the context id, ``@:`` before one that starts with ``@``)."""
        prefix = f"{persona_id}:{owner_prefix}"
        rows = await self._db.fetch(_LIST, {"pattern": like_escaped(prefix) + "%"})
        found = [  # LIKE ignores case on SQLite; an anonymous key starts with @ only as @:
            row
            for row in rows
            if str(row[0]).startswith(prefix)
            and (
                owner_prefix
                or not str(row[0])[len(prefix) :].startswith("@")
                or str(row[0])[len(prefix) :].startswith("@:")
            )
        ]
        last = {int(row[2]) for row in found}
        previews: dict[int, str] = {}
        if last:
            seqs, parameters = in_list("seq", sorted(last))
            query = Sql(
                "SELECT pa_messages.seq, pa_messages.message FROM pa_messages "
                f"WHERE pa_messages.seq IN {seqs}",
                table="pa_messages",
            )
            for seq, body in await self._db.fetch(query, parameters):
                message = json.loads(body)
                previews[int(seq)] = _preview(message)
        infos = []
        for key, count, seq, at_ms in found:
            context_id = str(key)[len(prefix) :]
            if not owner_prefix and context_id.startswith("@:"):
                context_id = context_id[2:]
            infos.append(
                ConversationInfo(
                    persona_id=persona_id,
                    context_id=context_id,
                    key=str(key),
                    messages=int(count),
                    updated_ms=int(at_ms) if at_ms is not None else None,
                    preview=previews.get(int(seq), ""),
                )
            )
        infos.sort(key=lambda info: (info.updated_ms or 0, info.key), reverse=True)
        return infos

    async def read(self, key: str) -> ConversationView | None:
        rows, swipes = await self.branches.rows(key), await self.branches.swipes(key)
        if not rows and not swipes:
            return None
        return ConversationView.of(key, rows, swipes)

    async def start(
        self, key: str, greeting_text: str, greetings: Sequence[str], selected: int
    ) -> None:
        """A new conversation opening with greeting ``selected`` (``greeting_text``: it
        rendered); the other ``greetings`` are that answer's alternatives.

        Raises:
            ConversationExistsError: ``key`` is taken.
            StorageQuotaError: the caller keeps as many conversations as it may.
        """
        swipes: dict[int, list[list[Message] | None]] = {}
        if len(greetings) > 1:
            swipes[0] = [
                None if i == selected else [{"role": "assistant", "content": text}]
                for i, text in enumerate(greetings)
            ]
        messages: list[Message] = (
            [{"role": "assistant", "content": greeting_text}] if greeting_text else []
        )
        swipes = swipes if messages else {}
        async with self._locks.hold(key), self.quota.adding(key, stored_size(messages, swipes)):
            await self.branches.create(key, messages, swipes)

    async def create(
        self,
        key: str,
        messages: Sequence[Message],
        swipes: Mapping[int, Sequence[Sequence[Message] | None]] | None = None,
    ) -> None:
        """A new conversation (an import): see :meth:`Branches.create`.

        Raises:
            StorageQuotaError: the caller may not keep that much more.
        """
        async with self._locks.hold(key), self.quota.adding(key, stored_size(messages, swipes)):
            await self.branches.create(key, messages, swipes)

    async def edit(self, key: str, message_id: int, content: str) -> None:
        """Change a message's text (what it grows by counted against the caller's bytes: a
        caller over its quota may still shorten a message).

        Raises:
            StorageQuotaError: the longer text would take the caller past its bytes.
        """
        async with self._locks.hold(key):
            rows = await self.branches.rows(key)
            old = next((row.message.get("content") for row in rows if row.id == message_id), "")
            grown = max(0, len(content) - len(old if isinstance(old, str) else ""))
            async with self.quota.adding(key, Stored(bytes=grown)):
                await self.branches.edit(key, message_id, content)

    async def delete(self, key: str, message_id: int, following: bool = False) -> None:
        async with self._locks.hold(key):
            await self.branches.delete(key, message_id, following=following)
        self.quota.changed(key)

    async def select(self, key: str, anchor: int, position: int) -> None:
        async with self._locks.hold(key):
            await self.branches.select(key, anchor, position)

    async def stash_answer(self, key: str) -> int:
        async with self._locks.hold(key):
            return await self.branches.stash_answer(key)

    async def keep_answer(self, key: str, anchor: int) -> None:
        async with self._locks.hold(key):
            await self.branches.keep_answer(key, anchor)

    async def extend_last(self, key: str, text: str) -> None:
        async with self._locks.hold(key):
            await self.branches.extend_last(key, text)

    async def fork(self, key: str, message_id: int, new_key: str) -> None:
        """A new conversation ``new_key`` of the messages up to and including ``message_id``,
        with the alternatives of their answers.

        Raises:
            MessageNotFound: no such message (deleted, or of another conversation).
            ConversationExistsError: ``new_key`` is taken.
            StorageQuotaError: the caller may not keep that much more.
        """
        async with self._locks.hold(key):
            rows, swipes = await self.branches.rows(key), await self.branches.swipes(key)
        upto = next((i for i, row in enumerate(rows) if row.id == message_id), None)
        if upto is None:
            raise MessageNotFound(f"The conversation has no message {message_id}")
        kept = rows[: upto + 1]
        messages: list[Message] = [{**row.message, "at_ms": row.at_ms} for row in kept]
        starts: dict[int, int] = {}  # anchor -> index of its answer's first message
        anchor = 0
        for index, row in enumerate(kept):
            if row.role == "user":
                anchor = row.id
            elif anchor not in starts:
                starts[anchor] = index
        alternatives: dict[int, list[list[Message] | None]] = {}
        for swipe in swipes:
            if swipe.anchor in starts:
                alternatives.setdefault(starts[swipe.anchor], []).append(swipe.messages)
        added = stored_size(messages, alternatives)
        async with self._locks.hold(new_key), self.quota.adding(new_key, added):
            if await self.branches.exists(new_key):
                raise ConversationExistsError()
            await self.branches.create(new_key, messages, alternatives)

    async def delete_conversation(self, key: str) -> None:
        async with self._locks.hold(key):
            if not await self.branches.delete_conversation(key):
                raise ConversationNotFound()
        self.quota.changed(key)


def _preview(message: Message, limit: int = 200) -> str:
    text = final_text([message]) if message.get("role") == "assistant" else message.get("content")
    text = text if isinstance(text, str) else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"
