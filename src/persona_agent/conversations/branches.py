"""The changes that steer a stored conversation, without its lock (the engine holds it for
a regeneration; :class:`~persona_agent.conversations.conversation_store.ConversationStore`
takes it for the rest): each reads the conversation, decides, and commits its writes
(:mod:`.branch_writes`) in one transaction.

The selected branch is in ``pa_messages`` (a message's id is its ``seq``); an answer's other
alternatives are rows of ``pa_swipes`` (its anchor: the id of the user message it answers,
0 for the greeting). Each operation is one transaction. Choosing an alternative of an
earlier answer writes the messages after it again, so their ids change, and the
alternatives of later answers are re-anchored in the same transaction (on the ids the new
rows got: a subquery by position). An answer keeps :data:`~.view.MAX_ALTERNATIVES`
alternatives at most, whichever write adds one (a regeneration's answer, a fork, an
import, greetings): past it the oldest that is not the selected one goes, and the others
are numbered again from 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from persona_agent.conversations.branch_writes import (
    DELETE_FROM,
    DELETE_MESSAGE,
    DELETE_SWIPES_OF,
    FORGET_SUMMARY,
    INSERT_SWIPE,
    STASH_SELECTED,
    UPDATE_MESSAGE,
    Write,
    creation_writes,
    now_ms,
    replace_answer,
    swipe_row,
)
from persona_agent.conversations.view import (
    StoredMessage,
    SwipeRow,
    answer_spans,
    loads,
    message_group,
    newest_alternatives,
)
from persona_agent.db import GroupCommitWriter, Sql
from persona_agent.errors import (
    ConversationEditError,
    ConversationExistsError,
    ConversationStateError,
    MessageNotFound,
    SwipeNotFound,
)
from persona_agent.llm.base import Message
from persona_agent.media.media_store import DELETE_CONVERSATION_MEDIA

if TYPE_CHECKING:
    from sqlalchemy.sql import Executable

__all__ = ["Branches", "Forgetful"]


class Forgetful(Protocol):
    """What keeps conversations in memory (the engine's history): told of each change."""

    def drop(self, conversation: str) -> None: ...


_ROWS = Sql(
    "SELECT pa_messages.seq, pa_messages.message, pa_messages.at_ms FROM pa_messages "
    "WHERE pa_messages.conversation = :c ORDER BY pa_messages.seq",
    table="pa_messages",
)
_SWIPES = Sql(
    "SELECT pa_swipes.anchor, pa_swipes.position, pa_swipes.messages, pa_swipes.at_ms "
    "FROM pa_swipes WHERE pa_swipes.conversation = :c "
    "ORDER BY pa_swipes.anchor, pa_swipes.position",
    table="pa_swipes",
)
_DELETE_MESSAGES = Sql(
    "DELETE FROM pa_messages WHERE pa_messages.conversation = :c", table="pa_messages"
)
_DELETE_SWIPES = Sql("DELETE FROM pa_swipes WHERE pa_swipes.conversation = :c", table="pa_swipes")
_DELETE_PROMPTS = Sql(
    "DELETE FROM pa_prompts WHERE pa_prompts.conversation = :c", table="pa_prompts"
)


class Branches:
    """A conversation's branches, read and changed (the caller holds the conversation's
    lock); every change drops the conversation from ``history``'s memory."""

    def __init__(self, writer: GroupCommitWriter, history: Forgetful) -> None:
        self._db = writer
        self._history = history
        self._stashed: dict[str, tuple[int, int]] = {}
        """A regeneration under way in this process: the stashed answer's anchor and position."""

    async def rows(self, key: str) -> list[StoredMessage]:
        found = await self._db.fetch(_ROWS, {"c": key})
        return [StoredMessage(int(seq), json.loads(body), at) for seq, body, at in found]

    async def swipes(self, key: str) -> list[SwipeRow]:
        found = await self._db.fetch(_SWIPES, {"c": key})
        return [SwipeRow(int(a), int(p), loads(body), int(at)) for a, p, body, at in found]

    async def _write(
        self,
        key: str,
        writes: Sequence[tuple[Sql | Executable, list[dict[str, Any]]]],
        *,
        from_seq: int | None = None,
    ) -> None:
        """The writes in one transaction; ``from_seq``: the first message changed, and the
        conversation's running summary goes if it covers that one (the next turn that needs
        it makes it again from the messages as they are now)."""
        if from_seq is not None:
            writes = [*writes, (FORGET_SUMMARY, [{"c": key, "s": from_seq}])]
        try:
            await self._db.write_together([(s, rows) for s, rows in writes if rows])
        finally:
            self._history.drop(key)

    async def exists(self, key: str) -> bool:
        return bool(await self.rows(key)) or bool(await self.swipes(key))

    async def create(
        self,
        key: str,
        messages: Sequence[Message],
        swipes: Mapping[int, Sequence[Sequence[Message] | None]] | None = None,
    ) -> None:
        """A new conversation of ``messages`` (each may carry ``at_ms``, when it was said).
        ``swipes``: by the index in ``messages`` of an answer's first message, all of that
        answer's alternatives in order, ``None`` at the selected one (``messages``' own).

        Raises:
            ConversationExistsError: ``key`` has messages or alternatives already.
            ConversationStateError: ``swipes`` names no answer's first message, or has not
                exactly one ``None``.
        """
        if await self.exists(key):
            raise ConversationExistsError()
        await self._write(key, creation_writes(key, messages, swipes or {}, after=0))

    async def edit(self, key: str, message_id: int, content: str) -> None:
        rows = await self.rows(key)
        row = _find(rows, message_id)
        if row.role not in ("user", "assistant"):
            raise ConversationEditError(
                f"Message {message_id} is a {row.role or 'system'} message: only the text of "
                "the user's and the persona's messages can be changed"
            )
        message = dict(row.message)
        message["content"] = content
        await self._write(
            key,
            [(UPDATE_MESSAGE, [{"c": key, "id": row.id, "body": json.dumps(message)}])],
            from_seq=row.id,
        )

    async def delete(self, key: str, message_id: int, *, following: bool) -> None:
        """Delete a message (an assistant message with tool calls with its tool results, a
        tool result with its call), or it and every message after it (``following``). An
        answer left without messages loses its alternatives, a deleted user message the
        alternatives of its answer."""
        rows = await self.rows(key)
        index = rows.index(_find(rows, message_id))
        gone = {row.id for row in rows[index:]} if following else message_group(rows, index)
        left = [row for row in rows if row.id not in gone]
        before, after = answer_spans(rows), answer_spans(left)
        emptied = [a for a, span in before.items() if span and a not in gone and not after.get(a)]
        writes: list[Write] = [(DELETE_MESSAGE, [{"c": key, "id": id_} for id_ in sorted(gone)])]
        anchors = [a for a in before if a in gone or a in emptied]
        writes.append((DELETE_SWIPES_OF, [{"c": key, "a": a} for a in anchors]))
        await self._write(key, writes, from_seq=min(gone))

    async def select(self, key: str, anchor: int, position: int) -> None:
        """Make the alternative ``position`` of the answer to ``anchor`` the selected one
        (the messages after that answer keep their place, with new ids).

        Raises:
            MessageNotFound: ``anchor`` is not a user message of the conversation (nor 0).
            SwipeNotFound: the answer has no alternative ``position``.
        """
        rows, swipes = await self.rows(key), await self.swipes(key)
        if anchor != 0:
            _find(rows, anchor)
        mine = {s.position: s for s in swipes if s.anchor == anchor}
        chosen = mine.get(position)
        if chosen is None:
            raise SwipeNotFound(
                f"The answer has no alternative {position}"
                + (f" (it has positions 0 to {len(mine) - 1})" if mine else " (it has none)")
            )
        if chosen.messages is None:
            return
        await self._write(
            key, replace_answer(key, rows, swipes, anchor, chosen), from_seq=anchor + 1
        )

    async def stash_answer(self, key: str) -> int:
        """Move the last answer into its alternatives (a regeneration starts); its anchor.
        A last message of the user's left without an answer (its answer deleted) is the
        anchor as it is: the regeneration answers it.

        Raises:
            ConversationStateError: there is no user message.
        """
        rows, swipes = await self.rows(key), await self.swipes(key)
        users = [row for row in rows if row.role == "user"]
        if not users:
            raise ConversationStateError(
                "Nothing to regenerate: the conversation has no message of the user"
            )
        anchor = users[-1].id
        answer = [row for row in rows if row.id > anchor]
        if not answer:  # nothing to stash: the answer is the message's first
            return anchor
        mine = [s for s in swipes if s.anchor == anchor]
        body = json.dumps([row.message for row in answer])
        selected = [s.position for s in mine if s.messages is None]
        writes: list[Write] = []
        if selected:
            position = selected[0]
            writes.append((STASH_SELECTED, [{"c": key, "a": anchor, "body": body}]))
        else:
            position = max((s.position for s in mine), default=-1) + 1
            at = answer[0].at_ms or now_ms()
            writes.append((INSERT_SWIPE, [swipe_row(key, anchor, position, body, at)]))
        writes.append((DELETE_FROM, [{"c": key, "a": anchor}]))
        await self._write(key, writes, from_seq=anchor + 1)
        self._stashed[key] = (anchor, position)
        return anchor

    async def add_greetings(self, key: str, greetings: Sequence[str], selected: int) -> None:
        """The greetings of a conversation that just opened with greeting ``selected``: the
        others become that answer's alternatives."""
        at = now_ms()
        bodies = [
            None if position == selected else json.dumps([{"role": "assistant", "content": text}])
            for position, text in enumerate(greetings)
        ]
        bodies = newest_alternatives(bodies, lambda body: body is None)
        rows = [swipe_row(key, 0, position, body, at) for position, body in enumerate(bodies)]
        await self._write(key, [(INSERT_SWIPE, rows if len(rows) > 1 else [])])

    async def keep_answer(self, key: str, anchor: int) -> None:
        """The answer now after ``anchor`` (a regeneration's) becomes its selected alternative
        (past the most an answer keeps, the oldest other goes and the rest are renumbered)."""
        self._stashed.pop(key, None)
        swipes = [s for s in await self.swipes(key) if s.anchor == anchor]
        if not swipes:  # the first answer of a message left unanswered: no alternatives
            return
        new = SwipeRow(anchor, max((s.position for s in swipes), default=-1) + 1, None, now_ms())
        kept = newest_alternatives([*swipes, new], lambda s: s.messages is None)
        trimmed = len(kept) <= len(swipes)
        rows = [
            swipe_row(
                key, anchor, n, None if s.messages is None else json.dumps(s.messages), s.at_ms
            )
            for n, s in (enumerate(kept) if trimmed else [(new.position, new)])
        ]
        gone = [{"c": key, "a": anchor}] if trimmed else []
        await self._write(key, [(DELETE_SWIPES_OF, gone), (INSERT_SWIPE, rows)])

    async def restore_answer(self, key: str, anchor: int) -> None:
        """A regeneration failed: the answer stashed for it is the selected one again."""
        stashed = self._stashed.pop(key, None)
        rows, swipes = await self.rows(key), await self.swipes(key)
        mine = [s for s in swipes if s.anchor == anchor and s.messages is not None]
        if not mine or any(s.anchor == anchor and s.messages is None for s in swipes):
            return
        position = stashed[1] if stashed is not None and stashed[0] == anchor else mine[-1].position
        chosen = next((s for s in mine if s.position == position), mine[-1])
        writes = replace_answer(key, rows, swipes, anchor, chosen)
        if len([s for s in swipes if s.anchor == anchor]) == 1:  # no other alternative
            writes.append((DELETE_SWIPES_OF, [{"c": key, "a": anchor}]))
        await self._write(key, writes, from_seq=anchor + 1)

    async def extend_last(self, key: str, addition: str) -> None:
        """Add ``addition`` to the text of the conversation's last message, the persona's.

        Raises:
            ConversationStateError: the last message is not an answer with text.
        """
        rows = await self.rows(key)
        last = rows[-1] if rows else None
        if (
            last is None
            or last.role != "assistant"
            or not isinstance(last.message.get("content"), str)
        ):
            raise ConversationStateError(
                "Nothing to continue: the last message is not the persona's answer"
            )
        message = dict(last.message)
        message["content"] = f"{message['content']}{addition}"
        await self._write(
            key,
            [(UPDATE_MESSAGE, [{"c": key, "id": last.id, "body": json.dumps(message)}])],
            from_seq=last.id,
        )

    async def delete_conversation(self, key: str) -> bool:
        """Delete the conversation; whether there was one."""
        if not await self.exists(key):
            return False
        await self._write(
            key,
            [
                (_DELETE_MESSAGES, [{"c": key}]),
                (_DELETE_SWIPES, [{"c": key}]),
                (DELETE_CONVERSATION_MEDIA, [{"c": key}]),
                (_DELETE_PROMPTS, [{"c": key}]),
            ],
            from_seq=0,
        )
        return True


def _find(rows: Sequence[StoredMessage], message_id: int) -> StoredMessage:
    for row in rows:
        if row.id == message_id:
            return row
    raise MessageNotFound(f"The conversation has no message {message_id}")
