"""The indexed push-config store: tasks without a webhook cost no query per event, and the
index follows configs set and deleted, and survives a restart (it is read from the
database); configs are capped per task and per caller, counted in the database (two
stores on one database: two replicas), concurrent creates included. On SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabasePushNotificationConfigStore
from a2a.types.a2a_pb2 import TaskPushNotificationConfig, TaskState
from a2a.utils.errors import InvalidParamsError
from sqlalchemy import event, insert
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.context_keys import CALLER_KEY, PERSONA_STATE_KEY
from persona_agent.a2a.tasks.push import ConfigLimits, IndexedConfigStore
from persona_agent.a2a.tasks.task_store import persona_owner
from persona_agent.db import tasks_table


class _Caller(User):
    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return "alice"


def context() -> ServerCallContext:
    return ServerCallContext(user=_Caller(), state={PERSONA_STATE_KEY: "socrates"})


def store(engine: AsyncEngine) -> IndexedConfigStore:
    return IndexedConfigStore(
        DatabasePushNotificationConfigStore(engine, owner_resolver=persona_owner)
    )


async def test_events_of_tasks_without_webhooks_cost_no_query(engine: AsyncEngine) -> None:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    configs = store(engine)
    assert await configs.get_info_for_dispatch("t1") == []  # reads the index once
    loaded = len(statements)
    for _ in range(100):
        assert await configs.get_info_for_dispatch("t1") == []
        assert not await configs.has_configs("t2")
    assert len(statements) == loaded

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
    return IndexedConfigStore(
        DatabasePushNotificationConfigStore(engine, owner_resolver=persona_owner), limits=limits
    )


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
        # Each store makes the SDK's table on its first use, first: two sessions racing to
        # CREATE TABLE IF NOT EXISTS on a new database (a pytest-xdist worker's) can both
        # try, and one fails; this test is about the cap.
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
