"""A key's owner part read in SQL text (owner_sql, owned_by_sql) as in Python (owner_part),
on a real SQLite file and on PostgreSQL."""

from __future__ import annotations

from persona_agent.conversations.keys import history_key, owned_by_sql, owner_part, owner_sql
from persona_agent.db import GroupCommitWriter, Sql

KEYS = [
    history_key("ada", "", "c1"),
    history_key("ada", "", "@c2"),  # an anonymous context id that starts with @
    history_key("ada", "", "a:b"),
    history_key("ada", "bob", "c1"),
    history_key("ada", "bob", "@:x"),
    history_key("bea", "b:o b@x", "c1"),  # quoted: no ':' in the owner part
    history_key("bea", "bo", "c1"),  # a prefix of "bob" that is another owner
]


async def _stored(writer: GroupCommitWriter) -> None:
    insert = Sql(
        "INSERT INTO pa_messages (conversation, message, at_ms) "
        "VALUES (:conversation, :message, :at_ms)",
        table="pa_messages",
    )
    await writer.write(insert, [{"conversation": k, "message": "{}", "at_ms": 1} for k in KEYS])


async def test_the_owner_part_in_sql_is_the_one_in_python(writer: GroupCommitWriter) -> None:
    await _stored(writer)
    column = "pa_messages.conversation"
    query = Sql(
        f"SELECT pa_messages.conversation, {owner_sql(column, 'sqlite')} FROM pa_messages",
        postgresql=(
            f"SELECT pa_messages.conversation, {owner_sql(column, 'postgresql')} FROM pa_messages"
        ),
    )
    found = dict(await writer.fetch(query))
    assert found == {key: owner_part(key) for key in KEYS}
    assert {owner_part(key) for key in KEYS} == {"", "@bob:", "@b%3Ao%20b%40x:", "@bo:"}


async def test_a_condition_on_the_owner_finds_the_keys_of_that_owner(
    writer: GroupCommitWriter,
) -> None:
    await _stored(writer)
    column = "pa_messages.conversation"
    for owner in {owner_part(key) for key in KEYS}:
        condition, parameters = owned_by_sql(column, owner, "sqlite")
        on_postgresql, _ = owned_by_sql(column, owner, "postgresql")
        query = Sql(
            f"SELECT pa_messages.conversation FROM pa_messages WHERE {condition} "
            "AND pa_messages.at_ms = :at",
            postgresql=(
                f"SELECT pa_messages.conversation FROM pa_messages WHERE {on_postgresql} "
                "AND pa_messages.at_ms = :at"
            ),
        )
        found = {key for (key,) in await writer.fetch(query, {**parameters, "at": 1})}
        assert found == {key for key in KEYS if owner_part(key) == owner}, owner
