"""Issue 46.7 and 46.9, the attack on PDF reading without a hub: small PDFs that cost
minutes of CPU (pages sharing one busy stream, an operator flood) stop at the limit they
pass, named; a PDF nested past any stack is refused as such; a canceled reading ends its
process. Real reader processes (:class:`ReaderProcesses`); every wait bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from persona_agent.errors import DocumentError, DocumentTooLargeError
from persona_agent.knowledge.documents import ReadLimits, read_document
from persona_agent.knowledge.reader_pool import ReaderProcesses
from tests.knowledge.pdfs import (
    nested_pdf,
    operator_flood_pdf,
    pdf_bomb,
    pdf_of,
    shared_stream_pdf,
)
from tests.knowledge.processes import alive, gone

PDF = "application/pdf"
SAFETY = 120  # seconds: a bound on a hung test, not a measure (the machine may be busy)


@pytest.fixture
async def readers() -> AsyncIterator[ReaderProcesses]:
    pool = ReaderProcesses(1)
    yield pool
    await pool.aclose()


async def read(readers: ReaderProcesses, data: bytes, limits: ReadLimits) -> str:
    """The reading's error message (the test expects one)."""
    async with asyncio.timeout(SAFETY):
        with pytest.raises(DocumentTooLargeError) as refused:
            await readers.read("slow.pdf", data, PDF, limits)
    return refused.value.message


async def test_pages_sharing_one_busy_stream_stop_at_the_character_limit(
    readers: ReaderProcesses,
) -> None:
    pdf = shared_stream_pdf(500)
    assert len(pdf) < 150_000  # far within every size limit
    message = await read(readers, pdf, ReadLimits(max_chars=100_000))
    assert message.startswith("slow.pdf: the PDF is over a limit: its text is longer than")
    assert "100,000 characters (PERSONA_AGENT_DOCUMENT_MAX_CHARS)" in message
    with pytest.raises(DocumentTooLargeError, match="PERSONA_AGENT_DOCUMENT_MAX_CHARS"):
        read_document("slow.pdf", pdf, PDF, ReadLimits(max_chars=100_000))  # in a thread too


async def test_an_operator_flood_stops_at_the_operator_limit(readers: ReaderProcesses) -> None:
    message = await read(readers, operator_flood_pdf(600_000), ReadLimits(max_operators=20_000))
    assert "more than 20,000 content operators (PERSONA_AGENT_DOCUMENT_MAX_OPERATORS)" in message


async def test_a_reading_stops_at_its_seconds(readers: ReaderProcesses) -> None:
    """Whichever stops it (the process's CPU timer, or the hub's kill past twice the time
    in a busy machine's wall-clock), the limit named is the seconds'."""
    message = await read(readers, shared_stream_pdf(500), ReadLimits(max_seconds=0.3))
    assert "PERSONA_AGENT_DOCUMENT_MAX_SECONDS" in message
    assert readers.reading == 0
    # The reader stays (stopped by its own timer) or was replaced: the next PDF is read.
    async with asyncio.timeout(SAFETY):
        pages = await readers.read("next.pdf", pdf_of(["Next one."]), PDF, ReadLimits())
    assert pages == [(1, "Next one.\n")]


async def test_a_pdf_nested_past_any_stack_is_refused_as_such(readers: ReaderProcesses) -> None:
    async with asyncio.timeout(SAFETY):
        with pytest.raises(DocumentError) as refused:
            await readers.read("deep.pdf", nested_pdf(200_000), PDF, ReadLimits())
    assert refused.value.message == (
        "deep.pdf: the PDF nests its objects (arrays, dictionaries, pages) too deeply to be "
        "read: it is damaged or made to stop readers"
    )


async def test_canceling_the_reading_ends_its_process(readers: ReaderProcesses) -> None:
    reading = asyncio.create_task(
        readers.read("slow.pdf", shared_stream_pdf(500), PDF, ReadLimits())
    )
    async with asyncio.timeout(SAFETY):
        while readers.reading == 0:  # noqa: ASYNC110 (the pool's own state)
            await asyncio.sleep(0.01)
    [pid] = readers.pids
    assert alive(pid)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert readers.pids == []
    await gone([pid])  # killed and reaped: its CPU work is over
    async with asyncio.timeout(SAFETY):  # a fresh process reads the next one
        pages = await readers.read("next.pdf", pdf_of(["Next one."]), PDF, ReadLimits())
    assert pages == [(1, "Next one.\n")]
    assert readers.pids not in ([], [pid])


async def test_a_closed_pool_ends_its_processes_and_reads_no_more(
    readers: ReaderProcesses,
) -> None:
    async with asyncio.timeout(SAFETY):
        await readers.read("one.pdf", pdf_of(["One."]), PDF, ReadLimits())
    [pid] = readers.pids
    await readers.aclose()
    assert readers.pids == []
    assert not alive(pid)
    with pytest.raises(DocumentError, match="the hub is stopping"):
        await readers.read("two.pdf", pdf_of(["Two."]), PDF, ReadLimits())


async def test_a_reader_takes_no_more_memory_than_it_may() -> None:
    """A PDF whose stream inflates to 600 MiB, with the decoded-bytes limit set above it:
    the reader's address space (400 MiB here) stops it, and says which setting did."""
    readers = ReaderProcesses(1, memory_bytes=400 * 1024 * 1024)
    try:
        async with asyncio.timeout(SAFETY):
            with pytest.raises(DocumentTooLargeError) as refused:
                await readers.read(
                    "bomb.pdf",
                    pdf_bomb(600 * 1024 * 1024),
                    PDF,
                    ReadLimits(max_decoded_bytes=2 * 1024**3),
                )
    finally:
        await readers.aclose()
    assert refused.value.message == (
        "bomb.pdf: the PDF needs more memory to read than its reader may take "
        "(PERSONA_AGENT_DOCUMENT_WORKER_MEMORY_BYTES)"
    )
