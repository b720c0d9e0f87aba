"""Reads a PDF in a worker process of its own, within memory, CPU-time and wall-clock limits.

PDFium is native code reading whatever a web server sent. It aborts its whole process
when an allocation fails, and a crafted file can make it work for a long time. So the
fetcher never loads it: :func:`extract_pdf` runs :func:`fetcher.pdf.task.read_pdf` in a
worker of a PDF pool (``fetcher.isolation.workers`` over ``fetcher.isolation.zygote``: the
same fresh, confined process per document as a page gets, forked from a zygote that loaded PDFium
once), killed when it runs past its deadline or when the caller is cancelled::

    caller ──PDF bytes (task frame)──▶ worker: limits, seccomp; read_pdf() (PDFium)
           ◀──one JSON answer, capped──  exit
    SIGXCPU (CPU) or no answer by the deadline ─▶ timeout
    abort/MemoryError (memory) ─▶ too_large    a refused system call ─▶ confined
    anything else ─▶ crashed

One process per document buys a clean slate: no state, no leaked memory and no
half-broken library carried from one hostile file to the next, and nothing of the
fetcher's own memory (other reads' pages, its sockets) in the process that parses the
file, because the zygote is a new program (``exec``), not a fork of the fetcher. The answer
is JSON checked field by field as untrusted input (:func:`answer_of`), never a pickle: a
worker that a crafted file took over can send any bytes it likes, and unpickling them
would run its code in the fetcher.

:func:`extract_pdf` is a coroutine: the event loop keeps serving other reads while a
worker reads, and cancelling it kills the worker.
"""

from __future__ import annotations

from fetcher.errors import IsolationError, PdfWorkerError, TaskError
from fetcher.isolation.workers import WorkerPool
from fetcher.isolation.zygote import Stopped, Wire, WorkLimits
from fetcher.pdf.result import PdfFailure, PdfLimits, PdfProblem, PdfResult, PdfText
from fetcher.pdf.task import read_pdf

__all__ = ["PDF_PRELOAD", "answer_of", "extract_pdf", "pdf_pool"]

#: What the PDF zygote imports once: the task and PDFium (about 80 ms, paid once).
PDF_PRELOAD = ("fetcher.pdf.task", "fetcher.pdf.text")
_TITLE_LIMIT = 300
_DETAIL_LIMIT = 300
#: What a worker's stop means for a PDF (a limit's own word; a refused call: confined).
_STOPPED = {
    "cpu": PdfProblem.TIMEOUT,
    "wall": PdfProblem.TIMEOUT,
    "memory": PdfProblem.TOO_LARGE,
    "confined": PdfProblem.CONFINED,
    "crashed": PdfProblem.CRASHED,
}
#: Problems a worker may report itself (the others come from how it ended).
_REPORTED = frozenset(PdfProblem) - {PdfProblem.CONFINED}


def pdf_pool(limits: PdfLimits, *, workers: int = 1) -> WorkerPool:
    """A worker pool for PDFs under ``limits`` (its processes' limits and answer cap)."""
    return WorkerPool(
        workers=workers,
        limits=WorkLimits(
            cpu_seconds=limits.cpu_seconds,
            memory_bytes=limits.memory_bytes,
            wall_seconds=limits.wall_seconds,
        ),
        preload=PDF_PRELOAD,
        max_reply_bytes=limits.max_output_bytes,
    )


def _one_line(text: str, limit: int) -> str:
    """Untrusted text made one printable line, cut to ``limit`` characters."""
    return "".join(char if char.isprintable() else " " for char in text[:limit])


_NONSENSE = PdfFailure(PdfProblem.CRASHED, "the PDF worker gave no readable answer")


def answer_of(value: Wire) -> PdfResult:
    """Check the worker's answer field by field: it is untrusted input."""
    if not isinstance(value, dict):
        return _NONSENSE
    problem = value.get("problem")
    if problem is not None:
        detail = value.get("detail")
        if problem not in _REPORTED or not isinstance(detail, str):
            return _NONSENSE
        return PdfFailure(PdfProblem(problem), _one_line(detail, _DETAIL_LIMIT))
    title, text = value.get("title"), value.get("text")
    pages, pages_read = value.get("pages"), value.get("pages_read")
    if not (
        isinstance(title, str)
        and isinstance(text, str)
        and type(pages) is int
        and type(pages_read) is int
        and 0 <= pages_read <= pages
    ):
        return _NONSENSE
    return PdfText(title=title[:_TITLE_LIMIT], text=text, pages=pages, pages_read=pages_read)


def _stop_failure(stopped: Stopped, limits: WorkLimits) -> PdfFailure:
    problem = _STOPPED[stopped.why]
    if problem is PdfProblem.TIMEOUT and stopped.why == "cpu":
        return PdfFailure(problem, f"more than {limits.cpu_seconds} s of CPU time")
    if problem is PdfProblem.TIMEOUT:
        return PdfFailure(problem, f"no answer within {limits.wall_seconds:g} s")
    if problem is PdfProblem.TOO_LARGE:
        return PdfFailure(problem, f"more than {limits.memory_bytes >> 20} MiB of memory")
    return PdfFailure(problem, stopped.detail)


async def extract_pdf(
    data: bytes, limits: PdfLimits | None = None, *, pool: WorkerPool | None = None
) -> PdfResult:
    """Read a PDF's title and text in a limited worker process.

    Args:
        data: The whole PDF file.
        limits: Input size and character limits, and (without ``pool``) the worker's
            memory, CPU and wall-clock limits (defaults: :class:`PdfLimits`).
        pool: The PDF pool to read in (:func:`pdf_pool`; its limits hold); without one,
            a pool is started for this document alone (the command line, tests).

    Returns:
        The text (see :class:`PdfText`) or why there is none: the document's own problem
        (no text layer, a password, truncated, damaged) or a limit it ran into
        (``too_large`` for memory or input size, ``timeout`` for CPU or wall-clock time,
        ``confined`` for a refused system call). Never raises for anything the document
        does.

    Raises:
        PdfWorkerError: The worker process could not be started.

    # Security
    Rule: a PDF is parsed only in a separate, confined worker process
    (``fetcher.isolation.zygote``: a new program's fork, limited to ``memory_bytes`` of address
    space and ``cpu_seconds`` of CPU, no files to write, no processes, a seccomp filter),
    killed after ``wall_seconds`` or as soon as the caller is cancelled; at most
    ``max_output_bytes`` of its answer are read, as JSON (never unpickled).
    Threat: a crafted PDF (decompression bomb, parser bug, endless loop) aborting,
    exhausting or stalling the fetcher, or taking over the process that parses it and,
    from there, the fetcher.
    Callers may rely on: this returns within about ``wall_seconds``; no worker outlives
    the call, cancelled or not; the caller's memory holds at most the input and
    ``max_output_bytes`` of answer, checked field by field; a worker's crash is a
    :class:`PdfFailure` value.
    Proof: tests/fetcher/pdf/test_worker.py (decompression bomb refused ``too_large`` below
    the memory limit and read above it, deadline kill, cancellation kill, answer cap,
    nonsense answers), tests/fetcher/isolation/test_subverted_worker.py (a subverted PDF worker),
    tests/fetcher/pdf/test_quality.py (the corpus's hostile files) and
    tests/deploy/test_systemd.py (the same inside the fetcher unit's sandbox).
    """
    limits = limits or PdfLimits()
    if len(data) > limits.max_input_bytes:
        return PdfFailure(
            PdfProblem.TOO_LARGE,
            f"{len(data)} bytes, more than {limits.max_input_bytes >> 20} MiB",
        )
    if pool is None:
        own = pdf_pool(limits)
        try:
            return await extract_pdf(data, limits, pool=own)
        finally:
            await own.aclose()
    try:
        value = await pool.run(read_pdf, data, limits.char_limit)
    except IsolationError as exc:
        raise PdfWorkerError(f"the PDF worker did not start: {exc}") from exc
    except TaskError as exc:
        # A bug in the reader (ours) on this file: a failure value, like a crash.
        return PdfFailure(
            PdfProblem.CRASHED, _one_line(f"the PDF reader failed: {exc.error}", _DETAIL_LIMIT)
        )
    if isinstance(value, Stopped):
        return _stop_failure(value, pool.limits)
    return answer_of(value)
