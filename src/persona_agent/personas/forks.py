"""Work done in forked processes, on the second core: loading thousands of persona files
is CPU work (parsing, validation) that one Python process does on one core.

:class:`ForkedMap` maps a function over a list with a forked helper: the helper
starts on the items as soon as the map is made, so the caller can go on with
other work (``serve`` imports the server while the helper parses), then calls
:meth:`ForkedMap.results`, which works through whatever the helper has not taken
yet and gathers the helper's share. The work is cut into chunks whose numbers
wait in a pipe, written before the fork: each process reads one number at a
time, and the kernel gives each to one reader only, so the two share the work
however fast each one is, with no lock and nothing else to agree on. The helper
writes each chunk's results, pickled, to an unlinked temporary file and exits
when the pipe is empty; a chunk the helper took and did not deliver (it died,
the function raised) is done again here, so a failing helper costs time, never a
result, and an exception the function raises comes out of
:meth:`ForkedMap.results` as it would without a helper. Results must pickle.

:func:`call_in_child` leaves a call to a forked child and returns at once: for
work whose result nobody waits for (writing the persona cache for the next
start), which then costs this process a fork (a few ms) instead.

A process is forked only where that is safe: on a system with ``fork``, from a
process running one thread (a fork copies only the calling thread, and any lock
another one holds would stay held in the child). Otherwise the work is done in
this process. A child exits with ``os._exit``: the parent's ``atexit`` handlers
and buffers are the parent's.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
import threading
from array import array
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import IO, Generic, NoReturn, TypeVar

__all__ = ["ForkedMap", "call_in_child"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

_MAX_CHUNKS = 2048
"""Chunk numbers are 2 bytes each and all written into the pipe before the fork: at most
4,096 bytes, what the smallest pipe holds (one page), so the write never blocks."""


def _can_fork() -> bool:
    """Whether this process may fork: it can, and it runs one thread only."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:  # threads started outside Python count too (Linux)
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return True


def call_in_child(function: Callable[[], object]) -> bool:
    """Call ``function`` in a forked child process, and return without waiting for it.

    Returns False, having run nothing, where a fork is not safe: the caller then
    calls it itself. The child exits when ``function`` returns (an exception is
    logged); a daemon thread of this process reaps it.
    """
    if not _can_fork():
        return False
    try:
        pid = os.fork()
    except OSError as error:  # no process to be had (EAGAIN, ENOMEM): done here instead
        logger.debug("No child process: %s", error)
        return False
    if pid == 0:
        status = 1
        try:
            function()
            status = 0
        except Exception:
            logger.exception("Work left to a child process failed")
        finally:
            os._exit(status)
    threading.Thread(target=_reap, args=(pid,), name=f"reap-{pid}", daemon=True).start()
    return True


def _reap(pid: int) -> None:
    with suppress(ChildProcessError):
        os.waitpid(pid, 0)


class ForkedMap(Generic[T, R]):
    """``function`` applied to each of ``items``, here and in a forked helper.

    Making one forks the helper, which starts at once (when ``items`` has at
    least ``min_items`` and a fork is safe, see the module's docstring);
    :meth:`results` does the rest here and returns every result, in the order
    of ``items``.
    """

    def __init__(
        self,
        function: Callable[[T], R],
        items: Sequence[T],
        *,
        min_items: int = 256,
        chunk_size: int = 8,
    ) -> None:
        self._function = function
        self._items = items
        self._chunk_size = max(chunk_size, -(-len(items) // _MAX_CHUNKS))
        chunks = -(-len(items) // self._chunk_size)
        self._results: list[list[R] | None] = [None] * chunks
        self._queue: int | None = None
        self._output: IO[bytes] | None = None
        self._helper: int | None = None
        self.helped = 0
        """How many chunks the helper delivered (set by :meth:`results`)."""
        if len(items) >= max(min_items, 1) and _can_fork():
            self._fork(chunks)

    def _fork(self, chunks: int) -> None:
        read, write = os.pipe()
        try:
            os.set_blocking(write, False)
            numbers = array("H", range(chunks)).tobytes()
            if os.write(write, numbers) != len(numbers):
                os.close(read)
                return
        except OSError:
            os.close(read)
            return
        finally:
            os.close(write)
        output: IO[bytes] | None = None
        try:
            output = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _gather)
            pid = os.fork()
        except OSError as error:  # no file, no process (EAGAIN, ENOMEM): all done here
            logger.debug("No helper process: %s", error)
            if output is not None:
                output.close()
            os.close(read)
            return
        if pid == 0:
            self._help(read, output)
        self._queue, self._output, self._helper = read, output, pid

    def _take(self, queue: int) -> int | None:
        """The number of the next chunk nobody has taken, or None when none is left."""
        number = os.read(queue, 2)
        return array("H", number)[0] if len(number) == 2 else None

    def _run(self, chunk: int) -> list[R]:
        start = chunk * self._chunk_size
        return [self._function(item) for item in self._items[start : start + self._chunk_size]]

    def _help(self, queue: int, output: IO[bytes]) -> NoReturn:
        """The helper's whole life: chunks until none is left, then exit (no cleanup, no
        atexit handlers: they belong to the parent)."""
        status = 1
        try:
            # One pickler for every chunk, and one unpickler (_gather): their memos last
            # from one chunk to the next, so what the results share (the personas' default
            # settings, field names) crosses once and stays shared.
            pickler = pickle.Pickler(output, pickle.HIGHEST_PROTOCOL)
            while (chunk := self._take(queue)) is not None:
                pickler.dump((chunk, self._run(chunk)))
            output.flush()
            status = 0
        finally:
            os._exit(status)

    def results(self) -> list[R]:
        """Every item's result, in order. Call once.

        Raises:
            Exception: what ``function`` raised, for the first item (in order of
                work done here) where it did.
        """
        queue = self._queue
        if queue is not None:
            self._queue = None
            try:
                while (chunk := self._take(queue)) is not None:
                    self._results[chunk] = self._run(chunk)
            finally:
                os.close(queue)
                self._gather()
        for chunk, done in enumerate(self._results):
            if done is None:  # no helper, or one that failed
                self._results[chunk] = self._run(chunk)
        return [result for chunk in self._results if chunk is not None for result in chunk]

    def _gather(self) -> None:
        """Wait for the helper to exit, and take what it delivered."""
        output, helper = self._output, self._helper
        self._output = self._helper = None
        if output is None or helper is None:
            return
        with output:
            with suppress(ChildProcessError):  # reaped by someone else: it has exited too
                os.waitpid(helper, 0)
            output.seek(0)
            unpickler = pickle.Unpickler(output)
            while True:
                try:
                    chunk, results = unpickler.load()
                except Exception:  # EOFError at the end; a record cut short by a death
                    return
                if self._results[chunk] is None:
                    self._results[chunk] = results
                    self.helped += 1
