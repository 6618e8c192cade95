"""The SDK's server parts without their tracing wrappers when its tracing is off.

a2a-sdk wraps the methods of its handler, dispatchers, event queues and queue manager
(``trace_class``), and ``task_manager.append_artifact_to_task``, in
``a2a.utils.telemetry``'s wrappers. With its tracing off (what
``persona-agent serve`` sets when no trace exporter is configured,
``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``) the wrappers stay: each call still goes
through a wrapper that logs a debug line and opens a span of a no-op object, about ten
calls a streamed token (each chunk is enqueued, dispatched, delivered, dequeued and
marked done). :func:`drop_idle_tracing` puts the SDK's own functions back in their
place, once, when the SDK's tracing is off: nothing a client or a log at INFO sees
changes (the wrappers only log at DEBUG). With tracing on, the wrappers stay.

Unlike the other fixes, this one replaces attributes of the SDK's classes (they are
built inside the SDK, per task, where no subclass of the hub's can reach them).

Canary: ``tests/a2a/test_sdk_fixes.py::test_sdk_wraps_its_methods_with_tracing_off``.
"""

from __future__ import annotations

import inspect
import sys
from types import ModuleType
from typing import Any

__all__ = ["TRACED_MODULES", "drop_idle_tracing", "untraced"]

TRACED_MODULES = (
    "a2a.server.request_handlers.default_request_handler",
    "a2a.server.request_handlers.default_request_handler_v2",
    "a2a.server.events.event_queue",
    "a2a.server.events.event_queue_v2",
    "a2a.server.events.event_consumer",
    "a2a.server.events.in_memory_queue_manager",
    "a2a.server.routes.jsonrpc_dispatcher",
    "a2a.server.routes.rest_dispatcher",
    "a2a.server.tasks.task_manager",
    "a2a.compat.v0_3.rest_handler",
)
"""The SDK's server modules whose functions ``a2a.utils.telemetry`` wraps."""


def _is_tracing_wrapper(value: Any, telemetry: ModuleType) -> bool:
    code = getattr(value, "__code__", None)
    return (
        code is not None
        and code.co_filename == telemetry.__file__
        and code.co_name in ("async_wrapper", "sync_wrapper")
        and callable(getattr(value, "__wrapped__", None))
    )


def untraced(namespace: Any, telemetry: ModuleType) -> int:
    """Replace, in ``namespace`` (a class or a module) and in the classes a module
    defines, each function wrapped by ``telemetry``'s tracing with the function it wraps;
    how many were replaced."""
    replaced = 0
    for name, value in list(vars(namespace).items()):
        if _is_tracing_wrapper(value, telemetry):
            setattr(namespace, name, value.__wrapped__)
            replaced += 1
        elif (
            isinstance(namespace, ModuleType)
            and inspect.isclass(value)
            and value.__module__ == namespace.__name__
        ):
            replaced += untraced(value, telemetry)
    return replaced


def drop_idle_tracing() -> int:
    """When the SDK's tracing is off, its server modules (those loaded) without their
    tracing wrappers (module docstring); how many functions were unwrapped."""
    from a2a.utils import telemetry

    if telemetry.otel_installed and telemetry.otel_enabled:
        return 0
    return sum(
        untraced(module, telemetry)
        for name in TRACED_MODULES
        if (module := sys.modules.get(name)) is not None
    )
