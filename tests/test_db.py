"""The group-commit writer (on a SQLite file and PostgreSQL) and the database URL's checks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import bindparam, delete, insert, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.conversations.message_tables import messages_table
from persona_agent.db import GroupCommitWriter, create_engine, tasks_table
from persona_agent.errors import ConfigError


class Commits:
    """Counts the transactions the writer makes from now on."""

    def __init__(self, writer: GroupCommitWriter) -> None:
        self._db = writer
        self._start = writer.transactions

    def __len__(self) -> int:
        return self._db.transactions - self._start


def message(conversation: str, text: str) -> dict[str, Any]:
    return {"conversation": conversation, "message": text}


async def stored_messages(engine: AsyncEngine) -> list[tuple[str, str]]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(messages_table.c.conversation, messages_table.c.message).order_by(
                messages_table.c.seq
            )
        )
        return [(row.conversation, row.message) for row in rows]


async def test_writes_arriving_together_share_one_transaction(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    db = writer
    statement = insert(messages_table)
    seen = Commits(writer)
    await asyncio.gather(*(db.write(statement, [message(f"c{i}", f"m{i}")]) for i in range(50)))
    assert len(seen) < 50  # the first goes alone, the other 49 wait and go together
    assert len(seen) <= 2
    assert sorted(await stored_messages(engine)) == sorted((f"c{i}", f"m{i}") for i in range(50))


async def test_every_writer_of_a_failed_transaction_gets_the_error(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    db = writer
    statement = insert(messages_table)
    await db.write(statement, [message("c0", "before")])
    good = asyncio.ensure_future(db.write(statement, [message("c1", "lost with the bad one")]))
    bad = asyncio.ensure_future(db.write(statement, [{"conversation": "c2", "message": None}]))
    results = await asyncio.gather(good, bad, return_exceptions=True)
    assert all(isinstance(result, IntegrityError) for result in results)
    await db.write(statement, [message("c3", "after")])  # the database keeps working
    assert await stored_messages(engine) == [("c0", "before"), ("c3", "after")]


async def test_a_table_keeps_its_order_of_writes_within_one_transaction(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    db = writer
    dialect_insert = postgresql_insert if engine.dialect.name == "postgresql" else sqlite_insert
    upsert = dialect_insert(tasks_table)
    upsert = upsert.on_conflict_do_update(
        index_elements=["owner", "id"], set_={"data": upsert.excluded.data}
    )
    remove = delete(tasks_table).where(
        tasks_table.c.owner == bindparam("o"), tasks_table.c.id == bindparam("i")
    )

    def row(task_id: str, data: bytes) -> dict[str, Any]:
        return {"owner": "p:", "id": task_id, "context_id": "c", "state": 1, "sort_ts": 1,
                "data": data}  # fmt: skip

    await db.write(upsert, [row("warm-up", b"")])  # the next four go in one transaction
    seen = Commits(writer)
    await asyncio.gather(
        db.write(upsert, [row("kept", b"v1")]),
        db.write(remove, [{"o": "p:", "i": "kept"}]),
        db.write(upsert, [row("kept", b"v2"), row("gone", b"v1")]),
        db.write(remove, [{"o": "p:", "i": "gone"}]),
    )
    assert len(seen) == 1
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(tasks_table.c.id, tasks_table.c.data).where(tasks_table.c.id != "warm-up")
        )
        assert [(row.id, row.data) for row in rows] == [("kept", b"v2")]


async def test_a_writer_canceled_while_it_waits_still_has_its_rows_written(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    db = writer
    statement = insert(messages_table)
    first = asyncio.ensure_future(db.write(statement, [message("c1", "first")]))
    second = asyncio.ensure_future(db.write(statement, [message("c2", "canceled")]))
    await asyncio.sleep(0)
    second.cancel()
    await first
    await db.aclose()
    assert ("c2", "canceled") in await stored_messages(engine)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("not a url", "is not a database URL"),
        ("postgresql+psycopg://u:secret@db/hub", "needs the Python package 'psycopg': for Po"),
        ("mysql+aiomysql://u:secret@db/hub", "needs the Python package 'aiomysql'"),
        ("sqlite:///hub.db", "must name an asyncio driver"),
        ("nosuchdb+async://u:secret@db/hub", "must name an asyncio driver"),
    ],
)
def test_a_database_url_that_cannot_work_is_a_clear_config_error(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        create_engine(url)
    assert "secret" not in str(raised.value)


async def test_many_rows_of_one_statement_keep_their_order(
    engine: AsyncEngine, writer: GroupCommitWriter
) -> None:
    # Rows of one write keep their order, and an upsert's later row of a key wins.
    db = writer
    await db.write(insert(messages_table), [message("c", f"m{i}") for i in range(150)])
    assert await stored_messages(engine) == [("c", f"m{i}") for i in range(150)]
    dialect_insert = postgresql_insert if engine.dialect.name == "postgresql" else sqlite_insert
    upsert = dialect_insert(tasks_table)
    upsert = upsert.on_conflict_do_update(
        index_elements=["owner", "id"], set_={"data": upsert.excluded.data}
    )
    rows = [
        {"owner": "p:", "id": f"t{i % 3}", "context_id": "c", "state": 1, "sort_ts": i,
         "data": f"v{i}".encode()}
        for i in range(9)
    ]  # fmt: skip
    await db.write(upsert, rows)
    async with engine.connect() as conn:
        stored = await conn.execute(select(tasks_table.c.id, tasks_table.c.data))
        assert sorted((row.id, row.data) for row in stored) == [
            ("t0", b"v6"),
            ("t1", b"v7"),
            ("t2", b"v8"),
        ]
