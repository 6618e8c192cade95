"""The terminal chat's event loop: a thread of its own that runs everything that talks.

The terminal belongs to the main thread, which waits at ``input()``; the A2A client, the
hub's REST API and the hub the chat may start in its process run on this loop, so the hub
keeps serving while the prompt waits. The main thread hands the loop a coroutine and waits
for it; Ctrl-C interrupts that wait (``KeyboardInterrupt`` in the main thread), and
:meth:`ChatLoop.run_or_cancel` then cancels the coroutine too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["UNWIND_WAIT", "ChatLoop", "running_loop"]

T = TypeVar("T")

UNWIND_WAIT = 10.0
"""How long a canceled coroutine may take to unwind (close its stream, print its last
line) before the prompt comes back regardless."""


class ChatLoop:
    """An event loop running on a thread of its own while the chat lasts."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chat", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for it; Ctrl-C interrupts the wait (the
        coroutine goes on)."""
        return self.submit(coroutine).result(timeout)

    def run_or_cancel(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for it; Ctrl-C cancels it (a request it
        streams is closed), waits for it to unwind (:data:`UNWIND_WAIT` seconds at most),
        and raises ``KeyboardInterrupt``."""
        unwound = threading.Event()
        running = self.submit(_until_unwound(coroutine, unwound))
        try:
            return running.result()
        except KeyboardInterrupt:
            running.cancel()
            unwound.wait(UNWIND_WAIT)
            raise

    def close(self) -> None:
        """Cancel what still runs (an abandoned answer), then stop the loop and its thread."""
        with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
            self.run(_cancel_others(), timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


async def _until_unwound(coroutine: Coroutine[Any, Any, T], unwound: threading.Event) -> T:
    try:
        return await coroutine
    finally:
        unwound.set()


async def _cancel_others() -> None:
    others = asyncio.all_tasks() - {asyncio.current_task()}
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


@contextlib.contextmanager
def running_loop() -> Iterator[ChatLoop]:
    """A :class:`ChatLoop` while the block lasts, closed after it."""
    loop = ChatLoop()
    try:
        yield loop
    finally:
        loop.close()
