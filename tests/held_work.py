"""Work a test sees off the event loop: chosen functions, run through ``asyncio.to_thread``
(the loop's default executor), held in their worker thread until the test lets them go.

So a test shows "another request was served *while* the scan ran" by events, on any
machine: the scan is seen started in its thread, the other request is served, then the
scan is released. No time is measured, and the held function itself runs unchanged.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any, TypeVar

__all__ = ["HELD_AT_MOST", "HeldWork", "held_in_worker_threads"]

_T = TypeVar("_T")

HELD_AT_MOST = 300.0
"""Seconds a held function waits for :meth:`HeldWork.release` before it runs anyway (a
test that failed before releasing it leaves no thread waiting for ever)."""


class HeldWork:
    """The functions held (:func:`held_in_worker_threads`): which of them have started in a
    worker thread, and their release."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, functions: tuple[Callable[..., Any], ...]
    ) -> None:
        self.functions = functions
        self.started: list[str] = []
        """The held functions that have started in a worker thread, by name, in order."""
        self._loop = loop
        self._changed = asyncio.Event()
        self._released = threading.Event()

    async def running(self, instead: asyncio.Future[Any] | None = None) -> str:
        """Wait until a held function is in its worker thread (its name); AssertionError
        if ``instead`` (the work that should call it) ends first. Bounded generously."""
        names = ", ".join(f.__qualname__ for f in self.functions)
        async with asyncio.timeout(HELD_AT_MOST):
            while not self.started:
                if instead is not None and instead.done():
                    instead.result()  # its error, if it failed
                    raise AssertionError(f"done without running {names} in a worker thread")
                waiting = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait(
                    [waiting, *([instead] if instead is not None else [])],
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiting.cancel()
                self._changed.clear()
        return self.started[0]

    def release(self) -> None:
        """Let every held function run (those that start later too)."""
        self._released.set()

    def _hold(self, name: str) -> None:
        """In the worker thread: say the function started, wait for the release."""
        self._loop.call_soon_threadsafe(self._started, name)
        self._released.wait(HELD_AT_MOST)

    def _started(self, name: str) -> None:
        self.started.append(name)
        self._changed.set()


class _HoldingExecutor(ThreadPoolExecutor):
    """A thread pool whose jobs calling one of :attr:`HeldWork.functions` wait in their
    worker thread for :meth:`HeldWork.release` first; every other job runs as usual."""

    def __init__(self, held: HeldWork) -> None:
        super().__init__(thread_name_prefix="held-work")
        self.held = held

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        target = _called(fn, args)
        if target not in self.held.functions:
            return super().submit(fn, *args, **kwargs)
        name = getattr(target, "__qualname__", repr(target))

        def held() -> _T:
            self.held._hold(name)
            return fn(*args, **kwargs)

        return super().submit(held)


def _called(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """The function a job runs: ``asyncio.to_thread(f, ...)`` submits
    ``functools.partial(context.run, f, ...)``."""
    if isinstance(fn, functools.partial) and fn.args and _is_context_run(fn.func):
        return fn.args[0]
    if _is_context_run(fn) and args:
        return args[0]
    return fn


def _is_context_run(fn: Any) -> bool:
    return isinstance(getattr(fn, "__self__", None), contextvars.Context)


@asynccontextmanager
async def held_in_worker_threads(*functions: Callable[..., Any]) -> AsyncIterator[HeldWork]:
    """While inside, the running loop's default executor holds each call of ``functions``
    in its worker thread until :meth:`HeldWork.release` (called at the exit too). The
    executor stays the loop's default afterwards (an ordinary pool once released); the
    one it replaced is shut down once its jobs are done."""
    loop = asyncio.get_running_loop()
    held = HeldWork(loop, functions)
    replaced = getattr(loop, "_default_executor", None)
    loop.set_default_executor(_HoldingExecutor(held))
    if isinstance(replaced, ThreadPoolExecutor):
        replaced.shutdown(wait=False)
    try:
        yield held
    finally:
        held.release()
