"""The indexed push-config store: tasks without a webhook cost no query per event, and the
index follows configs set and deleted, and survives a restart (it is read from the
database); configs are capped per task and per caller, counted in the database (two
stores on one database: two replicas), concurrent creates included; its table and rows
are the SDK's store's (each reads what the other wrote, encrypted or not). On SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.tasks.database_push_notification_config_store import (
    DatabasePushNotificationConfigStore,  # its own module: serve masks it in a2a.server.tasks
)
from a2a.types.a2a_pb2 import TaskPushNotificationConfig, TaskState
from a2a.utils.errors import InvalidParamsError
from cryptography.fernet import Fernet
from sqlalchemy import Connection, insert, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.context_keys import CALLER_KEY, PERSONA_STATE_KEY
from persona_agent.a2a.tasks.push import ConfigLimits, IndexedConfigStore
from persona_agent.a2a.tasks.task_store import persona_owner
from persona_agent.db import GroupCommitWriter, tasks_table


class _Caller(User):
    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return "alice"


def context() -> ServerCallContext:
    return ServerCallContext(user=_Caller(), state={PERSONA_STATE_KEY: "socrates"})


class CountingWriter(GroupCommitWriter):
    """The hub's writer, counting the queries it runs."""

    queries = 0

    async def fetch(self, statement: Any, parameters: dict[str, Any] | None = None) -> Any:
        self.queries += 1
        return await super().fetch(statement, parameters)


def store(engine: AsyncEngine) -> IndexedConfigStore:
    return IndexedConfigStore(GroupCommitWriter(engine))


async def test_events_of_tasks_without_webhooks_cost_no_query(engine: AsyncEngine) -> None:
    writer = CountingWriter(engine)
    configs = IndexedConfigStore(writer)
    assert await configs.get_info_for_dispatch("t1") == []  # reads the index once
    loaded = writer.queries
    for _ in range(100):
        assert await configs.get_info_for_dispatch("t1") == []
        assert not await configs.has_configs("t2")
    assert writer.queries == loaded

    hook = TaskPushNotificationConfig(task_id="t1", id="c1", url="https://example.org/hook")
    await configs.set_info("t1", hook, context())
    assert await configs.has_configs("t1")
    assert [c.id for c in await configs.get_info_for_dispatch("t1")] == ["c1"]

    again = store(engine)  # a restart: the index comes from the database
    assert await again.has_configs("t1")
    await again.delete_info("t1", context(), "c1")
    assert not await again.has_configs("t1")
    assert await again.get_info_for_dispatch("t1") == []


def caller_context(caller: str, user: str = "alice") -> ServerCallContext:
    class _Named(User):
        @property
        def is_authenticated(self) -> bool:
            return bool(user)

        @property
        def user_name(self) -> str:
            return user

    return ServerCallContext(
        user=_Named(), state={PERSONA_STATE_KEY: "socrates", CALLER_KEY: caller}
    )


def hook(task_id: str, config_id: str) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(
        task_id=task_id, id=config_id, url=f"https://example.org/{config_id}"
    )


def capped(
    engine: AsyncEngine, per_task: int = 3, per_caller: int = 5, unstored_seconds: float = 3600
) -> IndexedConfigStore:
    limits = ConfigLimits(per_task, per_caller, unstored_seconds=unstored_seconds)
    return IndexedConfigStore(GroupCommitWriter(engine), limits=limits)


async def test_a_task_has_per_task_configs_at_most_on_every_replica(engine: AsyncEngine) -> None:
    task = str(uuid.uuid4())  # the SDK's table outlives the tests' databases
    one, other = capped(engine), capped(engine)  # two replicas on one database
    await one.set_info(task, hook(task, "a"), caller_context("ip:10.1.1.1"))
    await other.set_info(task, hook(task, "b"), caller_context("ip:10.1.1.2"))
    await one.set_info(task, hook(task, "c"), caller_context("ip:10.1.1.3"))
    with pytest.raises(InvalidParamsError, match="PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_TASK=3"):
        await other.set_info(task, hook(task, "d"), caller_context("ip:10.1.1.4"))
    await other.set_info(task, hook(task, "b"), caller_context("ip:10.1.1.2"))  # replaced
    # Configs set before the cap are kept, but an event goes to per_task of them at most.
    await DatabasePushNotificationConfigStore(engine, owner_resolver=persona_owner).set_info(
        task, hook(task, "e"), caller_context("ip:10.1.1.5")
    )
    assert [c.id for c in await one.get_info_for_dispatch(task)] == ["a", "b", "c"]


async def test_a_caller_has_per_caller_configs_on_unfinished_tasks(engine: AsyncEngine) -> None:
    caller = f"key:{uuid.uuid4()}"
    one, other = capped(engine), capped(engine)
    tasks = [str(uuid.uuid4()) for _ in range(3)]
    for n in range(5):
        store = one if n % 2 else other
        await store.set_info(tasks[n % 3], hook(tasks[n % 3], f"c{n}"), caller_context(caller))
    with pytest.raises(InvalidParamsError, match="PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER=5"):
        await one.set_info(tasks[2], hook(tasks[2], "c5"), caller_context(caller))
    await other.set_info(tasks[2], hook(tasks[2], "c5"), caller_context("ip:10.9.9.9"))  # another
    await one.set_info(tasks[0], hook(tasks[0], "c0"), caller_context(caller))  # a replacement

    # tasks[0] (configs c0, c3) finishes: its configs count no more.
    await _store_task(engine, tasks[0], TaskState.TASK_STATE_COMPLETED)
    await _store_task(engine, tasks[1], TaskState.TASK_STATE_WORKING)
    await one.set_info(tasks[2], hook(tasks[2], "c6"), caller_context(caller))
    await other.set_info(tasks[1], hook(tasks[1], "c7"), caller_context(caller))
    fresh = str(uuid.uuid4())
    with pytest.raises(InvalidParamsError, match="PERSONA_AGENT_PUSH_MAX_CONFIGS_PER_CALLER"):
        await other.set_info(fresh, hook(fresh, "c8"), caller_context(caller))
    # A deleted config frees its place.
    await one.delete_info(tasks[1], caller_context(caller), "c7")
    await other.set_info(fresh, hook(fresh, "c8"), caller_context(caller))


async def test_concurrent_creates_never_pass_the_cap(engine: AsyncEngine) -> None:
    task = str(uuid.uuid4())
    # Replicas share PostgreSQL (an advisory lock); SQLite is one process's.
    stores = [capped(engine, per_task=10)] * 2
    if engine.dialect.name == "postgresql":
        stores = [capped(engine, per_task=10), capped(engine, per_task=10)]
        # Each store makes the SDK's table on its first use, first: this test is about the
        # cap (a race of two makes is test_two_replicas_make_the_table_at_once's).
        for one in stores:
            await one.get_info_for_dispatch(task)

    async def create(n: int) -> bool:
        try:
            await stores[n % 2].set_info(task, hook(task, f"c{n}"), caller_context(f"ip:{n}"))
        except InvalidParamsError:
            return False
        return True

    async with asyncio.timeout(30):
        created = await asyncio.gather(*(create(n) for n in range(30)))
    assert sum(created) == 10
    assert len(await stores[0].get_info_for_dispatch(task)) == 10


async def test_configs_never_outlive_their_task(engine: AsyncEngine) -> None:
    live, gone, legacy, young = (str(uuid.uuid4()) for _ in range(4))
    old = capped(engine, unstored_seconds=0)  # every config is old enough to be pruned
    for task_id in (live, gone):
        await old.set_info(task_id, hook(task_id, "c"), caller_context("ip:10.2.2.2"))
    sdk = DatabasePushNotificationConfigStore(engine, owner_resolver=persona_owner)
    await sdk.set_info(legacy, hook(legacy, "c"), caller_context("ip:10.2.2.2"))  # no caller row
    await _store_task(engine, live, TaskState.TASK_STATE_COMPLETED)
    assert await old.has_configs(gone)

    assert await old.prune() >= 2
    assert [c.id for c in await old.get_info_for_dispatch(live)] == ["c"]
    assert not await old.has_configs(gone)
    assert await sdk.get_info_for_dispatch(gone) == []
    assert await sdk.get_info_for_dispatch(legacy) == []
    # A config whose task is not stored yet (a message's is saved first) stays.
    one = capped(engine)
    await one.set_info(young, hook(young, "c"), caller_context("ip:10.2.2.2"))
    await one.prune()
    assert [c.id for c in await one.get_info_for_dispatch(young)] == ["c"]


async def _store_task(engine: AsyncEngine, task_id: str, state: TaskState) -> None:
    """The task as the hub's task store keeps it (owner ``socrates:alice``)."""
    async with engine.begin() as conn:
        await conn.execute(
            insert(tasks_table).values(
                owner="socrates:alice",
                id=task_id,
                context_id="ctx",
                state=int(state),
                sort_ts=1,
                data=b"",
            )
        )


def _described(conn: Connection) -> dict[str, Any]:
    """The SDK's table as the database describes it."""
    inspector = inspect(conn)
    name = "push_notification_configs"
    return {
        "columns": [
            (c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(name)
        ],
        "key": inspector.get_pk_constraint(name),
        "indexes": inspector.get_indexes(name),
    }


async def _made_by(engine: AsyncEngine, make: Callable[[], Awaitable[object]]) -> dict[str, Any]:
    async with engine.begin() as conn:
        await conn.exec_driver_sql("DROP TABLE IF EXISTS push_notification_configs")
    await make()
    async with engine.connect() as conn:
        return await conn.run_sync(_described)


async def test_the_table_made_is_the_sdks(engine: AsyncEngine) -> None:
    """On a database without it, the store makes the SDK's table as the SDK's store would:
    the same columns, key and index."""
    sdks = await _made_by(
        engine, DatabasePushNotificationConfigStore(engine, owner_resolver=persona_owner).initialize
    )
    ours = await _made_by(engine, lambda: store(engine).get_info_for_dispatch("t1"))
    assert ours == sdks
    assert [column for column, _, _ in ours["columns"]] == [
        "task_id",
        "config_id",
        "config_data",
        "owner",
        "protocol_version",
    ]


async def test_two_replicas_make_the_table_at_once(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.exec_driver_sql("DROP TABLE IF EXISTS push_notification_configs")
    stores = [store(engine) for _ in range(4)]  # each on a writer (connections) of its own
    task = str(uuid.uuid4())
    await asyncio.gather(
        *(one.set_info(task, hook(task, f"c{n}"), context()) for n, one in enumerate(stores))
    )
    configs = await stores[0].get_info(task, context())
    assert sorted(c.id for c in configs) == ["c0", "c1", "c2", "c3"]


def _with_secrets(task_id: str, config_id: str) -> TaskPushNotificationConfig:
    config = hook(task_id, config_id)
    config.token = f"token-{config_id}"
    config.authentication.scheme = "Bearer"
    config.authentication.credentials = f"secret-{config_id}"
    return config


@pytest.mark.parametrize("encrypted", [False, True])
async def test_the_sdks_store_and_this_one_read_each_others_configs(
    engine: AsyncEngine, encrypted: bool
) -> None:
    """An earlier hub's configs (written by the SDK's store) are read, and the SDK reads
    this store's: the same rows, encrypted with the same key alike."""
    key = Fernet.generate_key().decode() if encrypted else None
    sdk = DatabasePushNotificationConfigStore(
        engine, owner_resolver=persona_owner, encryption_key=key
    )
    ours = IndexedConfigStore(GroupCommitWriter(engine), encryption_key=key)
    task = str(uuid.uuid4())
    await sdk.set_info(task, _with_secrets(task, "old"), context())
    assert await ours.has_configs(task)  # the index is read from the SDK's rows
    assert await ours.set_info(task, _with_secrets(task, "new"), context()) == _with_secrets(
        task, "new"
    )
    expected = [_with_secrets(task, "new"), _with_secrets(task, "old")]
    for reader in (sdk, ours):
        got = sorted(await reader.get_info(task, context()), key=lambda c: c.id)
        assert got == expected
        dispatched = sorted(await reader.get_info_for_dispatch(task), key=lambda c: c.id)
        assert dispatched == expected
    assert await sdk.get_info(task, caller_context("ip:1", user="bob")) == []  # another owner
    assert await ours.get_info(task, caller_context("ip:1", user="bob")) == []

    stored = await _config_data(engine, task)
    assert (b"secret-new" in stored["new"]) is not encrypted
    if not encrypted:  # the same bytes as the SDK's (an encryption's are new each time)
        await sdk.set_info(task, _with_secrets(task, "new"), context())
        assert (await _config_data(engine, task))["new"] == stored["new"]

    await ours.delete_info(task, context(), "old")
    assert [c.id for c in await sdk.get_info(task, context())] == ["new"]
    await ours.delete_info(task, context())
    assert await sdk.get_info_for_dispatch(task) == []
    assert not await ours.has_configs(task)


async def test_rows_of_a2a_0_3_and_unencrypted_ones_are_read_as_the_sdk_reads_them(
    engine: AsyncEngine,
) -> None:
    """A row without ``protocol_version`` (A2A 0.3's JSON), and rows written before a key
    was set (read as plain JSON, with a warning); a row that cannot be read is left out."""
    plain = IndexedConfigStore(GroupCommitWriter(engine))
    task = str(uuid.uuid4())
    await plain.set_info(task, _with_secrets(task, "before"), context())
    legacy = b'{"id": "legacy", "url": "https://example.org/legacy", "token": "t03"}'
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO push_notification_configs "
                "(task_id, config_id, config_data, owner, protocol_version) VALUES "
                "(:t, 'legacy', :data, 'socrates:alice', NULL), "
                "(:t, 'broken', :broken, 'socrates:alice', '1.0')"
            ),
            {"t": task, "data": legacy, "broken": b"not json"},
        )
    key = Fernet.generate_key()
    sdk = DatabasePushNotificationConfigStore(
        engine, owner_resolver=persona_owner, encryption_key=key
    )
    keyed = IndexedConfigStore(GroupCommitWriter(engine), encryption_key=key)
    theirs = sorted(await sdk.get_info(task, context()), key=lambda c: c.id)
    assert [c.id for c in theirs] == ["before", "legacy"]
    assert theirs[1].token == "t03"
    assert sorted(await keyed.get_info(task, context()), key=lambda c: c.id) == theirs
    assert sorted(await plain.get_info(task, context()), key=lambda c: c.id) == theirs


async def _config_data(engine: AsyncEngine, task_id: str) -> dict[str, bytes]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT config_id, config_data FROM push_notification_configs WHERE task_id = :t"),
            {"t": task_id},
        )
        return {config_id: bytes(data) for config_id, data in rows}
