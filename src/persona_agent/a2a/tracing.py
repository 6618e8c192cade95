"""The SDK's tracing wrappers, taken off again when its tracing is off.

a2a-sdk wraps the methods of its request handlers, dispatchers and event
queues in ``trace_function`` at import. With tracing off
(``OTEL_INSTRUMENTATION_A2A_SDK_ENABLED=false``, or OpenTelemetry not installed)
every call still goes through a wrapper that opens and closes a no-op span: an
extra coroutine and half a dozen calls each time, ~15 % of the CPU a blocking
send costs (docs/performance.md). With tracing off, the hub puts the functions
the SDK wrapped back in their place; with it on, nothing changes and the spans
are made as the SDK makes them.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from a2a.utils import telemetry

__all__ = ["drop_disabled_tracing", "tracing_enabled"]


def tracing_enabled() -> bool:
    """Whether the SDK makes spans (the SDK decides this once, at import)."""
    return bool(telemetry.otel_installed and telemetry.otel_enabled)


def _unwrapped(value: Any) -> Callable[..., Any] | None:
    """The function a no-op tracing wrapper wraps, or None when ``value`` is none."""
    code = getattr(value, "__code__", None)
    if code is None or code.co_filename != telemetry.__file__:
        return None
    inner = getattr(value, "__wrapped__", None)
    return inner if callable(inner) else None


def drop_disabled_tracing() -> int:
    """With the SDK's tracing off, unwrap what it wrapped in the modules loaded so far.

    Returns how many functions were unwrapped (0 when tracing is on). Safe to call
    again: a function already unwrapped is left as it is.
    """
    if tracing_enabled():
        return 0
    unwrapped = 0
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "a2a" or name.startswith("a2a.")):
            continue
        owners: list[Any] = [module]
        owners += [
            value
            for value in vars(module).values()
            if inspect.isclass(value) and value.__module__ == name
        ]
        for owner in owners:
            for attribute, value in list(vars(owner).items()):
                inner = _unwrapped(value)
                if inner is not None:
                    setattr(owner, attribute, inner)
                    unwrapped += 1
    return unwrapped
