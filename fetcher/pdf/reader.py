"""The fetcher's PDF reading, bounded: a few worker processes at a time (I/O).

Each PDF is read in a worker process of its own (:func:`fetcher.pdf.worker.extract_pdf`:
a fresh ``python -I`` with memory, CPU and wall-clock limits, its answer JSON checked as
untrusted input). :class:`PdfReader` bounds how many such workers run at once, so a
crawl of many PDFs, or many reads of PDFs, cannot start more processes than the fetcher
unit's memory allows; more PDFs wait, in order, for a free place.

Why not the render pool (``fetcher.isolation.workers``): its workers are forked from a forkserver
that preloaded the HTML reader, and PDFium is a far larger native library with its own
memory behaviour (it aborts the process when memory runs out). A PDF gets a fresh
``python -I`` process that loads PDFium alone, and like the render pool's, its answer
comes back as checked JSON, never as a pickle.

Memory: a worker is capped at ``memory_bytes`` of address space (256 MiB; a corpus PDF
peaks at about 30 MiB resident), so ``workers`` of them (2) take at most 512 MiB; the PDF
bodies waiting for them are bounded by the downloader (``fetcher.net.download.Limits.pdfs_held``,
16 MiB each). The fetcher unit's ``MemoryMax`` holds both beside the render workers at
their own limits (deploy/systemd/README.md, "Memory"; tests/deploy/test_units.py).
"""

from __future__ import annotations

from fetcher.isolation.places import Places
from fetcher.pdf.result import PdfLimits, PdfResult
from fetcher.pdf.worker import extract_pdf

__all__ = ["PdfReader"]

#: What the crawl gives one PDF: text enough for several page budgets, 8 s of wall-clock
#: time (under the page's 10 s), 5 s of CPU, 256 MiB.
CRAWL_CHAR_LIMIT = 48_000


class PdfReader:
    """Reads PDFs in worker processes, at most ``workers`` at once; one per process."""

    def __init__(self, *, workers: int = 2, limits: PdfLimits | None = None) -> None:
        """Prepares the reader; workers start per PDF.

        Args:
            workers: PDFs read at once (worker processes).
            limits: Each PDF's limits (default: :class:`PdfLimits` with the crawl's
                character limit).
        """
        self.workers = workers
        self.limits = limits if limits is not None else PdfLimits(char_limit=CRAWL_CHAR_LIMIT)
        self._places = Places(workers)

    @property
    def busy(self) -> int:
        """Workers reading a PDF now."""
        return self._places.busy

    @property
    def waiting(self) -> int:
        """PDFs waiting for a worker."""
        return self._places.waiting

    async def read(self, data: bytes) -> PdfResult:
        """Reads one PDF in a worker of its own, once one of the ``workers`` places is free.

        Returns:
            The text, or why there is none (see :func:`fetcher.pdf.worker.extract_pdf`).

        Raises:
            fetcher.errors.PdfWorkerError: The worker could not be started.

        # Security
        At most ``workers`` worker processes exist at once, each within the limits, so
        PDFs cannot exhaust the unit's memory or processes however many arrive; waiting
        or reading, cancelling the caller ends its part (the worker is killed). Proved by
        ``tests/fetcher/pdf/test_reader.py``.
        """
        async with self._places.taken():
            return await extract_pdf(data, self.limits)
