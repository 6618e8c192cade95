"""Where documents are read: PDF and HTML in reader processes of the hub's own, a few at
once, apart from every other piece of work; plain text where it is asked for.

A PDF can cost minutes of CPU in a few kilobytes, and a thread reading it cannot be
stopped. So :class:`ReaderProcesses` reads each in a process of its own (at most
``workers`` at once; more documents wait their turn, never the hub's other work, whose
threads they do not take), bounded three ways: its limits, checked as it runs
(:mod:`persona_agent.knowledge.pdf_text`); a CPU timer in the process; and a kill of the
process when it runs past twice its CPU seconds in wall-clock time, or when the task
waiting for it is canceled: its work stops with it, and a fresh process takes its place
on the next document. :data:`READ_IN_THREAD` reads in a worker thread within the same
limits, without the kill: for tools and tests that start no hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from dataclasses import asdict
from typing import Any, Protocol

from persona_agent.errors import DocumentError, DocumentTooLargeError, UnsupportedDocumentError
from persona_agent.knowledge.documents import read_document
from persona_agent.knowledge.pdf_text import ReadLimits
from persona_agent.knowledge.reader_process import ANSWER_HEAD, REQUEST_HEAD

__all__ = ["READ_IN_THREAD", "DocumentReader", "ReaderProcesses", "ThreadReader"]

logger = logging.getLogger(__name__)

Pages = list[tuple[int | None, str]]

PARSED_TYPES = frozenset({"application/pdf", "text/html"})
"""Types read in a reader process: parsed, so their cost is not their size."""
_ERRORS: dict[str, type[DocumentError]] = {
    "large": DocumentTooLargeError,
    "unsupported": UnsupportedDocumentError,
    "document": DocumentError,
}


class DocumentReader(Protocol):
    """Reads a document's text (:func:`~persona_agent.knowledge.documents.read_document`)."""

    async def read(self, name: str, data: bytes, media_type: str, limits: ReadLimits) -> Pages:
        """The document's (page, text) pairs.

        Raises:
            DocumentError: as ``read_document``; :class:`DocumentTooLargeError` for a
                limit passed (the setting named).
        """
        ...

    async def aclose(self) -> None:
        """Stop reading (the hub stops)."""
        ...


class ThreadReader:
    """Reads in a worker thread, within the limits the reading checks itself."""

    async def read(self, name: str, data: bytes, media_type: str, limits: ReadLimits) -> Pages:
        return await asyncio.to_thread(read_document, name, data, media_type, limits)

    async def aclose(self) -> None:
        return None


READ_IN_THREAD = ThreadReader()


class _Process:
    """One reader process and its pipes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    async def ask(self, header: dict[str, Any], data: bytes, max_answer: int) -> dict[str, Any]:
        stdin, stdout = self.process.stdin, self.process.stdout
        if stdin is None or stdout is None:  # never: it is made with pipes
            raise ConnectionError("a reader without pipes")
        encoded = json.dumps(header).encode()
        stdin.write(REQUEST_HEAD.pack(len(encoded), len(data)) + encoded)
        stdin.write(data)
        await stdin.drain()
        (size,) = ANSWER_HEAD.unpack(await stdout.readexactly(ANSWER_HEAD.size))
        if size > max_answer:
            raise ValueError(f"an answer of {size:,} bytes")
        answer = json.loads(await stdout.readexactly(size))
        if not isinstance(answer, dict):
            raise ValueError("an answer that is not an object")
        return answer


class ReaderProcesses:
    """Documents read in up to ``workers`` processes (started on first need, kept for the
    next document); ``memory_bytes``: the address space each may take (0: no cap)."""

    def __init__(self, workers: int = 2, *, memory_bytes: int = 1024 * 1024 * 1024) -> None:
        self.workers = workers
        self.memory_bytes = memory_bytes
        self._slots = asyncio.Semaphore(workers)
        self._idle: list[_Process] = []
        self._busy: set[_Process] = set()
        self._ending: set[asyncio.Task[int]] = set()
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The reader processes alive now (idle or reading)."""
        return [worker.pid for worker in (*self._idle, *self._busy)]

    @property
    def reading(self) -> int:
        """Documents being read now."""
        return len(self._busy)

    async def read(self, name: str, data: bytes, media_type: str, limits: ReadLimits) -> Pages:
        """The document's (page, text) pairs: PDF and HTML read in a reader process
        (after the documents before them, when all are busy), plain text in a thread.
        Canceled, the reading stops: its process is killed.

        Raises:
            DocumentError: as ``read_document``; :class:`DocumentTooLargeError` for a
                limit passed, the time limit included (the setting named).
        """
        if media_type not in PARSED_TYPES:
            return await READ_IN_THREAD.read(name, data, media_type, limits)
        async with self._slots:
            if self._closed:
                raise DocumentError(f"{name}: the hub is stopping: send it again later")
            worker = self._idle.pop() if self._idle else await self._start(name)
            self._busy.add(worker)
            try:
                answer = await self._ask(worker, name, data, media_type, limits)
            except BaseException:
                self._kill(worker)  # canceled, out of time, or broken: its work stops here
                raise
            finally:
                self._busy.discard(worker)
            self._idle.append(worker)
        return _pages(name, answer)

    async def _ask(
        self, worker: _Process, name: str, data: bytes, media_type: str, limits: ReadLimits
    ) -> dict[str, Any]:
        header = {"name": name, "media_type": media_type, "limits": asdict(limits)}
        wall = 2 * limits.max_seconds + 5  # a reader waiting for a busy CPU is not refused
        try:
            async with asyncio.timeout(wall):
                return await worker.ask(header, data, max_answer=8 * limits.max_chars + 65536)
        except TimeoutError:
            raise DocumentTooLargeError(
                f"{name}: the document is over a limit: its reading took more than {wall:g} s "
                f"(twice PERSONA_AGENT_DOCUMENT_MAX_SECONDS, {limits.max_seconds:g} s, and 5 s)"
            ) from None
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as error:
            code = worker.process.returncode
            logger.warning("Document reader %d failed on %s: %s", worker.pid, name, error)
            stopped = f"its reader stopped (exit code {code})" if code is not None else str(error)
            raise DocumentError(f"{name}: the document could not be read: {stopped}") from None

    async def _start(self, name: str) -> _Process:
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "persona_agent.knowledge.reader_process",
                str(self.memory_bytes),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                start_new_session=True,  # no Ctrl-C of the hub's terminal: the hub ends it
            )
        except OSError as error:  # no process to be had: too many, no memory
            logger.error("A document reader could not start: %s", error)
            raise DocumentError(
                f"{name}: the document could not be read: its reader could not start "
                "(see the hub's log)"
            ) from None
        return _Process(process)

    def _kill(self, worker: _Process) -> None:
        if worker.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
        ending = asyncio.get_running_loop().create_task(worker.process.wait())
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)

    async def aclose(self) -> None:
        """Stop every reader process: a document being read fails."""
        self._closed = True
        for worker in (*self._idle, *self._busy):
            self._kill(worker)
        self._idle.clear()
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)


def _pages(name: str, answer: dict[str, Any]) -> Pages:
    """The reader's answer: its pages, or its error raised."""
    error = answer.get("error")
    if isinstance(error, str):
        raise _ERRORS.get(str(answer.get("kind")), DocumentError)(error)
    pages = answer.get("pages")
    if not isinstance(pages, list):
        raise DocumentError(f"{name}: the document could not be read (its reader said nothing)")
    read: Pages = []
    for page, text in pages:
        read.append((page if isinstance(page, int) else None, str(text)))
    return read
