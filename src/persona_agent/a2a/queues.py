"""The SDK's event queues on :class:`asyncio.Queue` before Python 3.13.

a2a-sdk needs queues that can be shut down (``shutdown()``, ``QueueShutDown``).
On Python 3.13 and later it makes them with :class:`asyncio.Queue`; before, with
``culsans``, a queue that is safe to use from several threads at once, built on
``aiologic`` locks and conditions. The SDK makes five a task and uses each from the
event loop alone; they were 14 % of the instructions the hub executes for a
blocking send (callgrind, c=16: 7.85 M before, 6.73 M after), and each one is a
reference cycle only the garbage collector frees (120 objects a task in cycles
before, 20 after).

:func:`use_asyncio_queues` makes the SDK's modules create :class:`ShutdownQueue`
instead: :class:`asyncio.Queue` with Python 3.13's ``shutdown()``, raising the
``QueueShutDown`` the SDK catches. On Python 3.13 and later it does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import deque
from collections.abc import Callable
from typing import TypeVar

from a2a.utils import _async_queue_compat as compat

__all__ = ["ShutdownQueue", "use_asyncio_queues"]

T = TypeVar("T")


class ShutdownQueue(asyncio.Queue[T]):
    """:class:`asyncio.Queue` that can be shut down, as it can on Python 3.13.

    After :meth:`shutdown`, :meth:`put` raises the SDK's ``QueueShutDown``, and
    :meth:`get` does once the queue is empty; waiting getters and putters wake up.
    ``shutdown(immediate=True)`` also drops what is queued and counts it as done,
    so :meth:`join` returns.
    """

    _is_shut_down = False

    def shutdown(self, immediate: bool = False) -> None:
        self._is_shut_down = True
        if immediate:
            while not self.empty():
                self.get_nowait()
                self.task_done()
        for waiters in (self._getters, self._putters):  # type: ignore[attr-defined]
            while waiters:
                waiter = waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)

    def put_nowait(self, item: T) -> None:
        if self._is_shut_down:
            raise compat.QueueShutDown
        super().put_nowait(item)

    def get_nowait(self) -> T:
        if self._is_shut_down and self.empty():
            raise compat.QueueShutDown
        return super().get_nowait()

    async def put(self, item: T) -> None:
        while self.full():
            if self._is_shut_down:
                raise compat.QueueShutDown
            await self._wait(self._putters, self.full)  # type: ignore[attr-defined]
        self.put_nowait(item)

    async def get(self) -> T:
        while self.empty():
            if self._is_shut_down:
                raise compat.QueueShutDown
            await self._wait(self._getters, self.empty)  # type: ignore[attr-defined]
        return self.get_nowait()

    async def _wait(
        self, waiters: deque[asyncio.Future[None]], blocked: Callable[[], bool]
    ) -> None:
        """Wait in ``waiters`` for a wake-up; on cancellation pass it on, as asyncio does."""
        waiter = self._get_loop().create_future()  # type: ignore[attr-defined]
        waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            waiter.cancel()
            with contextlib.suppress(ValueError):
                waiters.remove(waiter)
            if not blocked() and not waiter.cancelled():
                self._wakeup_next(waiters)  # type: ignore[attr-defined]
            raise


_sdk_create_queue = compat.create_async_queue


def use_asyncio_queues() -> int:
    """Make the SDK's modules loaded so far create :class:`ShutdownQueue`.

    Returns how many modules now do (0 on Python 3.13 and later, where the SDK
    already uses :class:`asyncio.Queue`). Safe to call again.
    """
    if sys.version_info >= (3, 13):
        return 0
    patched = 0
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("a2a."):
            continue
        if getattr(module, "create_async_queue", None) is _sdk_create_queue:
            module.create_async_queue = ShutdownQueue  # type: ignore[attr-defined]
            patched += 1
    return patched
