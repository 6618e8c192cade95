"""A PDF's text, page by page, within a budget of the work it costs: pages, bytes its
streams decode to, content-stream operators run, characters written out, CPU seconds.

The budget is checked while the reading runs (each operator, each piece of text, each
page), not after: an 80 KB file of 500 pages sharing one busy content stream, or a
stream of millions of operators, stops at the limit it passes, naming it. Where the
reading runs in a process of its own (:mod:`persona_agent.knowledge.reader_pool`), a CPU
timer interrupts it too within pypdf's own parsing (:func:`cpu_alarm`), where no operator
is seen yet.

pypdf is imported here only: a hub given no PDF loads none of it.
"""

from __future__ import annotations

import io
import logging
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from persona_agent.errors import DocumentError, DocumentTooLargeError

__all__ = ["DEFAULT_LIMITS", "ReadLimits", "cpu_alarm", "pdf_pages"]


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """What reading one document may cost (all of it for a PDF; the text types cost
    their bytes alone): its pages, the bytes its content streams decode to (all pages
    together; each stream is also stopped at that size while it inflates), the
    content-stream operators run and the characters of text written out (all pages
    together, forms included), and the CPU seconds the reading takes."""

    max_pages: int = 500
    max_decoded_bytes: int = 32 * 1024 * 1024
    max_operators: int = 2_000_000
    max_chars: int = 2_000_000
    max_seconds: float = 30.0


DEFAULT_LIMITS = ReadLimits()


class OutOfBudget(BaseException):
    """The reading passed a limit: raised inside pypdf, which catches ``Exception`` in many
    places to go on past a damaged object, so it is a ``BaseException`` that none of them
    swallows; :func:`pdf_pages` turns it into :class:`DocumentTooLargeError`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _seconds_reason(limits: ReadLimits) -> str:
    return (
        f"its reading took more than {limits.max_seconds:g} s of CPU "
        "(PERSONA_AGENT_DOCUMENT_MAX_SECONDS)"
    )


class _Work:
    """The work done so far on one PDF, checked against its limits as it grows."""

    def __init__(self, limits: ReadLimits) -> None:
        self.limits = limits
        self.operators = 0
        self.chars = 0
        self.decoded = 0
        self._deadline = time.thread_time() + limits.max_seconds

    def operator(self, *_: Any) -> None:
        """pypdf's ``visitor_operand_before``: one more operator run."""
        self.operators += 1
        if self.operators > self.limits.max_operators:
            raise OutOfBudget(
                f"its pages run more than {self.limits.max_operators:,} content operators "
                "(PERSONA_AGENT_DOCUMENT_MAX_OPERATORS)"
            )
        if not self.operators & 0x3FF:
            self.check_time()

    def text(self, text: str, *_: Any) -> None:
        """pypdf's ``visitor_text``: a piece of text written out."""
        self.chars += len(text)
        if self.chars > self.limits.max_chars:
            raise OutOfBudget(self.chars_reason())

    def chars_reason(self) -> str:
        return (
            f"its text is longer than {self.limits.max_chars:,} characters "
            "(PERSONA_AGENT_DOCUMENT_MAX_CHARS)"
        )

    def check_time(self) -> None:
        if time.thread_time() > self._deadline:
            raise OutOfBudget(_seconds_reason(self.limits))


def pdf_pages(name: str, data: bytes, limits: ReadLimits) -> list[tuple[int | None, str]]:
    """Each page's text (numbered from 1), within ``limits``.

    Raises:
        DocumentTooLargeError: the PDF passes one of ``limits`` (the setting named).
        DocumentError: it is encrypted, damaged past reading, or nests its objects too
            deeply to be read.
    """
    from pypdf.errors import LimitReachedError, PyPdfError

    # pypdf logs each repair it makes of a damaged file at WARNING: a caller's file is
    # not the hub's problem, and the outcome is told to the caller.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    too_big = (
        f"{name}: the PDF's content decodes to more than {limits.max_decoded_bytes:,} bytes "
        "(PERSONA_AGENT_DOCUMENT_MAX_DECODED_BYTES)"
    )
    try:
        with _pdf_limits(limits.max_decoded_bytes):
            return _read(name, data, limits, too_big)
    except OutOfBudget as spent:
        raise DocumentTooLargeError(f"{name}: the PDF is over a limit: {spent.reason}") from None
    except DocumentError:
        raise
    except LimitReachedError:
        raise DocumentTooLargeError(too_big) from None
    except RecursionError:
        raise DocumentError(
            f"{name}: the PDF nests its objects (arrays, dictionaries, pages) too deeply "
            "to be read: it is damaged or made to stop readers"
        ) from None
    except MemoryError:
        raise DocumentTooLargeError(
            f"{name}: the PDF needs more memory to read than its reader may take "
            "(PERSONA_AGENT_DOCUMENT_WORKER_MEMORY_BYTES)"
        ) from None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
        # pypdf raises more than its own errors on a damaged file.
        raise DocumentError(f"{name}: not a readable PDF ({type(error).__name__})") from None


def _read(name: str, data: bytes, limits: ReadLimits, too_big: str) -> list[tuple[int | None, str]]:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        raise DocumentError(f"{name}: the PDF is encrypted: send it without a password")
    count = len(reader.pages)
    if count > limits.max_pages:
        raise DocumentTooLargeError(
            f"{name}: {count:,} pages, over the limit of {limits.max_pages:,} "
            "(PERSONA_AGENT_DOCUMENT_MAX_PAGES)"
        )
    work = _Work(limits)
    pages: list[tuple[int | None, str]] = []
    for number, page in enumerate(reader.pages, 1):
        work.check_time()
        contents = page.get_contents()  # each page counts what it decodes, shared or not
        work.decoded += len(contents.get_data()) if contents is not None else 0
        if work.decoded > limits.max_decoded_bytes:
            raise DocumentTooLargeError(too_big)
        text = page.extract_text(visitor_operand_before=work.operator, visitor_text=work.text)
        pages.append((number, text or ""))
    if sum(len(text) for _, text in pages) > limits.max_chars:  # what a visitor did not see
        raise OutOfBudget(work.chars_reason())
    return pages


@contextmanager
def _pdf_limits(decoded_bytes: int) -> Iterator[Any]:
    """pypdf's own decompression limits, lowered to ``decoded_bytes`` for this thread's
    reading (a context variable: other readings keep theirs; ``apply_configuration`` is
    pypdf 7's, the version pyproject.toml asks for)."""
    import pypdf

    with pypdf.apply_configuration(
        zlib_maximum_output_length=decoded_bytes,
        lzw_maximum_output_length=decoded_bytes,
        run_length_maximum_output_length=decoded_bytes,
        brotli_maximum_output_length=decoded_bytes,
        array_based_stream_maximum_output_length=decoded_bytes,
        maximum_declared_stream_length=decoded_bytes,
        image_maximum_buffer_size=decoded_bytes,
    ) as configuration:
        yield configuration


@contextmanager
def cpu_alarm(limits: ReadLimits) -> Iterator[None]:
    """Within, :class:`OutOfBudget` is raised once the process has spent
    ``limits.max_seconds`` of CPU (``ITIMER_PROF``): in pypdf's own parsing too, where no
    operator is seen. Only in a process's main thread (a reader process's)."""

    def spent(_signum: int, _frame: object) -> None:
        raise OutOfBudget(_seconds_reason(limits))

    previous = signal.signal(signal.SIGPROF, spent)
    signal.setitimer(signal.ITIMER_PROF, limits.max_seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
