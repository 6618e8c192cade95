"""The indexed push-config store: tasks without a webhook cost no query per event, and the
index follows configs set and deleted, and survives a restart (it is read from the
database). On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabasePushNotificationConfigStore
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from persona_agent.a2a.keys import PERSONA_STATE_KEY
from persona_agent.a2a.push_notifications import IndexedConfigStore
from persona_agent.a2a.task_store import persona_owner


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
