"""Forgetting a caller on real databases (a SQLite file and PostgreSQL): everything of that
caller goes, with every persona, and nothing of a caller whose name looks like it (a LIKE
wildcard in the name, another case, the name inside an anonymous context id or another
user's name).

Leave the LIKE patterns unescaped, or drop the exact filter after them, and it fails."""

from __future__ import annotations

import time

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.tasks.task_store import SqlTaskStore
from persona_agent.api.caller_data import CallerData
from persona_agent.chat.history import ConversationHistory
from persona_agent.conversations.keys import conversation_key
from persona_agent.conversations.summary_store import Summary, SummaryStore
from persona_agent.conversations.user_persona import UserPersona, UserPersonas
from persona_agent.db import GroupCommitWriter
from persona_agent.knowledge.turn import AttachedFile
from persona_agent.memory.memory_table import memories_table
from persona_agent.memory.records import MemoryRecords
from tests.a2a.test_task_store import ctx, make_task
from tests.knowledge.test_library import knowledge

TARGET = "key:a_b"
LOOKALIKES = ["key:axb", "KEY:A_B", "x:key:a_b", "key:a_b2"]


def said(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]


async def remember(writer: GroupCommitWriter, persona_id: str, owner: str) -> None:
    row = {
        "persona_id": persona_id,
        "owner": owner,
        "conversation": conversation_key(owner, "c1"),
        "role": "user",
        "text": f"{owner} was here",
        "model": "hashing-512",
        "vector": b"\0" * 8,
        "at_ms": int(time.time() * 1000),
    }
    await writer.write(insert(memories_table), [row])


async def test_a_caller_is_forgotten_with_every_persona_and_nobody_else(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    history = ConversationHistory(writer)
    tasks = SqlTaskStore(writer)
    records = MemoryRecords(writer)
    summaries = SummaryStore(writer)
    library = knowledge(writer)
    users = UserPersonas(writer)
    for owner in [TARGET, *LOOKALIKES]:
        await users.put_caller(owner, UserPersona(f"{owner} saved"))
        for persona_id in ("socrates", "hermit"):
            key = f"{persona_id}:{conversation_key(owner, 'c1')}"
            await history.append(key, said(owner))
            await users.put_conversation(key, UserPersona(f"{owner} here"))
            # A document the caller sent in the conversation (an A2A file part).
            note = AttachedFile("note.html", "text/html", f"<p>{owner} vault 4711</p>".encode())
            await library.for_turn(persona_id, conversation_key(owner, "c1"), "vault?", [note])
            await summaries.save(
                key,
                persona_id=persona_id,
                owner=owner,
                summary=Summary(f"{owner} said hello", 1),
                previous=Summary(),
            )
            await tasks.save(make_task(f"{persona_id}-{owner}"), ctx(persona_id, owner))
            await remember(writer, persona_id, owner)
    # An anonymous caller's context id that spells the target's key.
    anonymous = f"socrates:{conversation_key('', 'x:@key%3Aa_b:y')}"
    await history.append(anonymous, said("anonymous"))
    await users.put_conversation(anonymous, UserPersona("anonymous"))
    await tasks.flush()

    gone = await CallerData(records, history, tasks, library.store, users).forget(TARGET)

    counts = (gone.memories, gone.conversations, gone.messages, gone.tasks, gone.documents)
    assert counts == (2, 2, 4, 2, 2)
    assert gone.user_personas == 3  # its saved one, and its two conversations'
    assert await users.get_caller(TARGET) is None
    for owner in LOOKALIKES:
        assert await users.get_caller(owner) == UserPersona(f"{owner} saved"), owner
    assert await users.get_conversation(anonymous) == UserPersona("anonymous")
    fresh = ConversationHistory(writer)  # the database, not the forgetting store's cache
    fresh_tasks = SqlTaskStore(writer)
    for persona_id in ("socrates", "hermit"):
        key = f"{persona_id}:{conversation_key(TARGET, 'c1')}"
        assert await fresh.load(key) == []
        assert await history.load(key) == []  # nor in the cache of the store that had it
        assert await fresh_tasks.get(f"{persona_id}-{TARGET}", ctx(persona_id, TARGET)) is None
        assert await records.page(persona_id, TARGET, before=None, limit=10) == []
        assert await users.get_conversation(key) is None
        assert await summaries.get(key) == Summary()
        target_conversation = conversation_key(TARGET, "c1")
        assert await library.for_turn(persona_id, target_conversation, "vault?") == ()
        for owner in LOOKALIKES:
            key = f"{persona_id}:{conversation_key(owner, 'c1')}"
            assert await fresh.load(key) == said(owner), owner
            assert await users.get_conversation(key) == UserPersona(f"{owner} here"), owner
            task = await fresh_tasks.get(f"{persona_id}-{owner}", ctx(persona_id, owner))
            assert task is not None, owner
            left = await records.page(persona_id, owner, before=None, limit=10)
            assert [record.text for record in left] == [f"{owner} was here"]
            assert (await summaries.get(key)).text == f"{owner} said hello", owner
            found = await library.for_turn(persona_id, conversation_key(owner, "c1"), "vault?")
            assert [passage.text for passage in found] == [f"{owner} vault 4711"], owner
    assert await fresh.load(anonymous) == said("anonymous")
