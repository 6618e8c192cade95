"""The user personas' store on a SQLite file and PostgreSQL: deleting a persona takes its
conversations' user personas, and nothing of another persona whose id starts the same
(the hub's whole path: tests/integration/test_user_personas.py)."""

from __future__ import annotations

from persona_agent.conversations.user_persona import UserPersona, UserPersonas
from persona_agent.db import GroupCommitWriter


async def test_a_deleted_personas_conversations_lose_their_user_personas(
    writer: GroupCommitWriter,
) -> None:
    users = UserPersonas(writer)
    await users.put_caller("bob", UserPersona("Bob", "saved"))
    for persona_id in ("ada", "ada-2", "adab"):
        for context in ("c1", "@bob:c2"):
            key = f"{persona_id}:{context}"
            await users.put_conversation(key, UserPersona(f"{persona_id} user"))
    await users.forget_persona("ada")
    assert await users.get_conversation("ada:c1") is None
    assert await users.get_conversation("ada:@bob:c2") is None
    for persona_id in ("ada-2", "adab"):
        for context in ("c1", "@bob:c2"):
            found = await users.get_conversation(f"{persona_id}:{context}")
            assert found == UserPersona(f"{persona_id} user")
    assert await users.get_caller("bob") == UserPersona("Bob", "saved")
