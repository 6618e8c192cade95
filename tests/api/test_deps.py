"""The REST routes' dependencies are coroutines: FastAPI runs a plain function dependency in
AnyIO's worker threads (a thread hop each, and up to 40 threads under concurrent calls:
docs/performance.md, issue 52)."""

from __future__ import annotations

import inspect
from typing import Any, get_args

from fastapi.params import Depends

from persona_agent.api import deps
from persona_agent.api.routes import user_personas
from persona_agent.api.routes.chats import conversations


def dependencies_of(module: Any) -> dict[str, Any]:
    """Each ``Depends`` a module offers, bare or in an ``Annotated`` alias: name → callable."""
    found: dict[str, Any] = {}
    for name, value in vars(module).items():
        marks = [value] if isinstance(value, Depends) else list(get_args(value)[1:])
        for mark in marks:
            if isinstance(mark, Depends) and mark.dependency is not None:
                found[name] = mark.dependency
    return found


def test_every_dependency_the_routes_name_is_a_coroutine() -> None:
    found = {
        **dependencies_of(deps),
        **{f"conversations.{k}": v for k, v in dependencies_of(conversations).items()},
        **{f"user_personas.{k}": v for k, v in dependencies_of(user_personas).items()},
    }

    assert {"Parts", "Store", "Auth", "Registry", "Conversations", "Reader"} <= set(found)
    assert [name for name, call in found.items() if not inspect.iscoroutinefunction(call)] == []
