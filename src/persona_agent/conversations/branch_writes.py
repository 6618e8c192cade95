"""The writes that change a conversation's branches, as statements and rows: no database here.

The statements of ``pa_messages`` and ``pa_swipes`` (and of the running summary a change
drops), and the writes of the two changes that rewrite a branch: an alternative put in
place of an answer (the messages after it written again, the alternatives of later
answers re-anchored on the ids the new rows get) and a new conversation with its
alternatives. :class:`~persona_agent.conversations.branches.Branches` reads the
conversation, decides, and commits these in one transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Integer,
    String,
    Text,
    and_,
    bindparam,
    delete,
    insert,
    null,
    text,
    update,
)
from sqlalchemy.sql import Executable

from persona_agent.conversations.message_tables import messages_table, swipes_table
from persona_agent.conversations.summary_store import summaries_table
from persona_agent.conversations.view import (
    StoredMessage,
    SwipeRow,
    answer_spans,
    newest_alternatives,
)
from persona_agent.db import Sql
from persona_agent.errors import ConversationStateError
from persona_agent.llm.base import Message

__all__ = [
    "DELETE_FROM",
    "DELETE_MESSAGE",
    "DELETE_SWIPES_AFTER",
    "DELETE_SWIPES_OF",
    "FORGET_SUMMARY",
    "INSERT_SWIPE",
    "STASH_SELECTED",
    "UPDATE_MESSAGE",
    "Write",
    "creation_writes",
    "now_ms",
    "replace_answer",
    "swipe_row",
]

Write = tuple[Sql | Executable, list[dict[str, Any]]]

_M = messages_table.c
_S = swipes_table.c


def now_ms() -> int:
    return int(time.time() * 1000)


INSERT_MESSAGE = insert(messages_table)
INSERT_SWIPE = insert(swipes_table)


def message_row(key: str, body: str, at: int | None) -> dict[str, Any]:
    return {"conversation": key, "message": body, "at_ms": at}


def swipe_row(key: str, anchor: int, position: int, body: str | None, at: int) -> dict[str, Any]:
    return {
        "conversation": key,
        "anchor": anchor,
        "position": position,
        "messages": body,
        "at_ms": at,
    }


INSERT_SWIPE_AT = text(
    f"INSERT INTO {swipes_table.name} (conversation, anchor, position, messages, at_ms) "
    f"VALUES (:c, (SELECT seq FROM {messages_table.name} WHERE conversation = :k AND "
    "seq > :after ORDER BY seq LIMIT 1 OFFSET :j), :p, :body, :at)"
).bindparams(
    bindparam("c", type_=String()),
    bindparam("k", type_=String()),
    bindparam("after", type_=Integer()),
    bindparam("j", type_=Integer()),
    bindparam("p", type_=Integer()),
    bindparam("body", type_=Text()),
    bindparam("at", type_=BigInteger()),
)
"""An alternative anchored on the ``j``-th message after ``after`` (written just before it, in
the same transaction: its id is not known yet)."""
DELETE_FROM = delete(messages_table).where(
    and_(_M.conversation == bindparam("c"), _M.seq > bindparam("a"))
)
DELETE_MESSAGE = delete(messages_table).where(
    and_(_M.conversation == bindparam("c"), _M.seq == bindparam("id"))
)
UPDATE_MESSAGE = (
    update(messages_table)
    .where(and_(_M.conversation == bindparam("c"), _M.seq == bindparam("id")))
    .values(message=bindparam("body"))
)
DELETE_SWIPES_OF = delete(swipes_table).where(
    and_(_S.conversation == bindparam("c"), _S.anchor == bindparam("a"))
)
DELETE_SWIPES_AFTER = delete(swipes_table).where(
    and_(_S.conversation == bindparam("c"), _S.anchor > bindparam("a"))
)
STASH_SELECTED = (
    update(swipes_table)
    .where(
        and_(_S.conversation == bindparam("c"), _S.anchor == bindparam("a"), _S.messages.is_(None))
    )
    .values(messages=bindparam("body"))
)
SELECT_POSITION = (
    update(swipes_table)
    .where(
        and_(
            _S.conversation == bindparam("c"),
            _S.anchor == bindparam("a"),
            _S.position == bindparam("p"),
        )
    )
    .values(messages=null())
)
FORGET_SUMMARY = delete(summaries_table).where(
    and_(
        summaries_table.c.conversation == bindparam("c"),
        summaries_table.c.upto_seq >= bindparam("s"),
    )
)


def replace_answer(
    key: str,
    rows: Sequence[StoredMessage],
    swipes: Sequence[SwipeRow],
    anchor: int,
    chosen: SwipeRow,
) -> list[Write]:
    """The writes that put ``chosen``'s messages in place of the answer to ``anchor`` (that
    one stored as the alternative it was), the messages after it written again."""
    spans = answer_spans(rows)
    current = [rows[i].message for i in spans.get(anchor, [])]
    start = spans[anchor][-1] + 1 if spans.get(anchor) else _after_anchor(rows, anchor)
    tail = rows[start:]
    new_rows: list[tuple[Message, int | None]] = [(m, chosen.at_ms) for m in chosen.messages or []]
    new_rows += [(row.message, row.at_ms) for row in tail]
    body = json.dumps(current)
    writes: list[Write] = [
        (STASH_SELECTED, [{"c": key, "a": anchor, "body": body}]),
        (SELECT_POSITION, [{"c": key, "a": anchor, "p": chosen.position}]),
        (DELETE_FROM, [{"c": key, "a": anchor}]),
        (INSERT_MESSAGE, [message_row(key, json.dumps(m), at) for m, at in new_rows]),
    ]
    offset = len(chosen.messages or [])
    where = {row.id: offset + i for i, row in enumerate(tail) if row.role == "user"}
    later = [s for s in swipes if s.anchor in where]
    writes.append((DELETE_SWIPES_AFTER, [{"c": key, "a": anchor}] if later else []))
    writes.append(
        (
            INSERT_SWIPE_AT,
            [
                {
                    "c": key,
                    "k": key,
                    "after": anchor,
                    "j": where[s.anchor],
                    "p": s.position,
                    "body": None if s.messages is None else json.dumps(s.messages),
                    "at": s.at_ms,
                }
                for s in later
            ],
        )
    )
    return writes


def _after_anchor(rows: Sequence[StoredMessage], anchor: int) -> int:
    """The index just after the user message ``anchor`` (0 for the greeting)."""
    for index, row in enumerate(rows):
        if row.id == anchor:
            return index + 1
    return 0


def creation_writes(
    key: str,
    messages: Sequence[Message],
    swipes: Mapping[int, Sequence[Sequence[Message] | None]],
    *,
    after: int,
) -> list[Write]:
    """The writes of a new conversation (its messages, then its alternatives)."""
    at = now_ms()
    rows = []
    for message in messages:
        plain = {k: v for k, v in message.items() if k != "at_ms"}
        stamp = message.get("at_ms")
        rows.append(message_row(key, json.dumps(plain), stamp if isinstance(stamp, int) else at))
    greeting: list[dict[str, Any]] = []
    anchored: list[dict[str, Any]] = []
    for start, alternatives in sorted(swipes.items()):
        if not 0 <= start < len(messages) or messages[start].get("role") == "user":
            raise ConversationStateError(
                f"Alternatives given at message {start}, which starts no answer"
            )
        if sum(a is None for a in alternatives) != 1:
            raise ConversationStateError(
                f"The alternatives at message {start} must leave exactly one out, the selected one"
            )
        users = [i for i in range(start) if messages[i].get("role") == "user"]
        kept = newest_alternatives(alternatives, lambda alternative: alternative is None)
        for position, alternative in enumerate(kept):
            body = None if alternative is None else json.dumps(list(alternative))
            stamp = rows[start]["at_ms"]
            if users:
                anchored.append(
                    {
                        "c": key,
                        "k": key,
                        "p": position,
                        "body": body,
                        "at": stamp,
                        "after": after,
                        "j": users[-1],
                    }
                )
            else:
                greeting.append(swipe_row(key, 0, position, body, stamp))
    return [(INSERT_MESSAGE, rows), (INSERT_SWIPE, greeting), (INSERT_SWIPE_AT, anchored)]
