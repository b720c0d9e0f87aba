"""The fetcher's PDF reading, bounded: a few worker processes at a time (I/O).

Each PDF is read in a worker process of its own (:func:`fetcher.pdf.worker.extract_pdf`:
a fresh, confined process with memory, CPU and wall-clock limits, its answer JSON checked
as untrusted input). :class:`PdfReader` holds the PDF pool (``fetcher.isolation.workers``, the same
mechanism as the render pool's: ``fetcher.isolation.zygote``), which bounds how many such workers
run at once, so a crawl of many PDFs, or many reads of PDFs, cannot start more processes
than the fetcher unit's memory allows; more PDFs wait, in order, for a free place.

Why a pool of its own, not the render pool: its zygote preloads PDFium instead of the
HTML reader (each fork copies only what its reader needs), and a PDF has limits of its
own (5 s of CPU, 8 s).

Memory: a worker is capped at ``memory_bytes`` of address space (256 MiB; a corpus PDF
peaks at about 30 MiB resident), so ``workers`` of them (2) take at most 512 MiB; the PDF
bodies waiting for them are bounded by the downloader (``fetcher.net.download.Limits.pdfs_held``,
16 MiB each). The fetcher unit's ``MemoryMax`` holds both beside the render workers at
their own limits (deploy/systemd/README.md, "Memory"; tests/deploy/test_units.py).
"""

from __future__ import annotations

from fetcher.isolation.workers import WorkerPool
from fetcher.pdf.result import PdfLimits, PdfResult
from fetcher.pdf.worker import extract_pdf, pdf_pool

__all__ = ["PdfReader"]

#: What the crawl gives one PDF: text enough for several page budgets, 8 s of wall-clock
#: time (under the page's 10 s), 5 s of CPU, 256 MiB.
CRAWL_CHAR_LIMIT = 48_000


class PdfReader:
    """Reads PDFs in worker processes, at most ``workers`` at once; one per process."""

    def __init__(self, *, workers: int = 2, limits: PdfLimits | None = None) -> None:
        """Prepares the reader; its zygote starts with the first PDF, workers per PDF.

        Args:
            workers: PDFs read at once (worker processes).
            limits: Each PDF's limits (default: :class:`PdfLimits` with the crawl's
                character limit).
        """
        self.workers = workers
        self.limits = limits if limits is not None else PdfLimits(char_limit=CRAWL_CHAR_LIMIT)
        #: The PDF workers (tests run their own tasks in it, as a subverted worker would).
        self.pool: WorkerPool = pdf_pool(self.limits, workers=workers)

    @property
    def busy(self) -> int:
        """Workers reading a PDF now."""
        return self.pool.busy

    @property
    def waiting(self) -> int:
        """PDFs waiting for a worker."""
        return self.pool.waiting

    async def aclose(self) -> None:
        """Stops the PDF workers and their zygote."""
        await self.pool.aclose()

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
        return await extract_pdf(data, self.limits, pool=self.pool)
