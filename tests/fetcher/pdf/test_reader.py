"""The fetcher's PDF reader: at most ``workers`` worker processes at once, in order."""

from __future__ import annotations

import asyncio

import pytest

from fetcher.pdf.reader import PdfReader
from fetcher.pdf.result import PdfText
from tests.fetcher.pdf.maker import Text, make_pdf
from tests.fetcher.pdf.test_worker import pdf_workers

PAPER = make_pdf([[Text(72, 600, b"A paper read by the fetcher.")]], title="Paper")


async def settle() -> None:
    """Lets every task started so far run up to its first real wait."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_past_the_workers_pdfs_wait_their_turn_and_all_are_read() -> None:
    reader = PdfReader(workers=1)
    reads = [asyncio.create_task(reader.read(PAPER)) for _ in range(3)]
    await settle()
    assert (reader.busy, reader.waiting) == (1, 2)
    most = 0
    while not all(read.done() for read in reads):
        most = max(most, len(pdf_workers()))
        await asyncio.sleep(0.005)
    assert most <= 1
    results = await asyncio.gather(*reads)
    assert all(isinstance(result, PdfText) and result.title == "Paper" for result in results)
    assert (reader.busy, reader.waiting) == (0, 0)


async def test_a_pdf_cancelled_while_waiting_never_starts_a_worker() -> None:
    reader = PdfReader(workers=1)
    first = asyncio.create_task(reader.read(PAPER))
    second = asyncio.create_task(reader.read(PAPER))
    await settle()
    assert reader.waiting == 1
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert reader.waiting == 0
    assert isinstance(await first, PdfText)
    assert (reader.busy, reader.waiting) == (0, 0)
