"""Reads a PDF in a process of its own, within memory, CPU-time and wall-clock limits.

PDFium is native code reading whatever a web server sent. It aborts its whole process
when an allocation fails, and a crafted file can make it work for a long time. So the
fetcher never loads it: :func:`extract_pdf` starts a fresh worker process
(``python -I -m fetcher.pdf.worker``) for each document, which limits itself before it
reads a byte of the document, and is killed when it runs past its deadline or when the
caller is cancelled::

    caller ──PDF bytes on stdin──▶ worker: prlimit(AS, CPU, CORE, FSIZE, NOFILE, NPROC)
                                           read_pdf() (fetcher.pdf.text, PDFium)
           ◀──one JSON object on stdout──  exit 0
    exit by SIGXCPU/SIGKILL (CPU) ─▶ timeout     abort/MemoryError (memory) ─▶ too_large
    no answer by the deadline ─▶ killed, timeout  anything else ─▶ crashed

One process per document costs a Python start-up (about 0.1 s with PDFium's import) and
buys a clean slate: no state, no leaked memory and no half-broken library carried from
one hostile file to the next, and nothing of the fetcher's own memory (other reads'
pages, its sockets) in the process that parses the file, because the worker is a new
program (``exec``), not a fork. The answer is JSON checked field by field as untrusted
input, never a pickle: a worker that a crafted file took over can send any bytes it
likes, and unpickling them would run its code in the fetcher.

:func:`extract_pdf` is a coroutine: the event loop keeps serving other reads while a
worker reads (the exchange is asyncio's subprocess pipes), and cancelling it kills the
worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from typing import Any

from fetcher.errors import PdfWorkerError
from fetcher.pdf.result import PdfFailure, PdfLimits, PdfProblem, PdfResult, PdfText

__all__ = ["extract_pdf"]

# The worker's exit status when Python itself ran out of memory (PDFium aborts instead).
_EXIT_MEMORY = 86
# File descriptors the worker may hold: its three standard ones and a few for Python.
_WORKER_FILES = 16
_TITLE_LIMIT = 300
_DETAIL_LIMIT = 300
_PIPE_CHUNK = 1 << 16


def _worker_command(limits: PdfLimits) -> list[str]:
    return [
        sys.executable,
        "-I",  # no PYTHON* variables, no user site, no current directory on the path
        "-m",
        "fetcher.pdf.worker",
        str(limits.memory_bytes),
        str(limits.cpu_seconds),
        str(limits.char_limit or 0),
    ]


def _failure(problem: PdfProblem, detail: str) -> PdfFailure:
    return PdfFailure(problem, detail)


def _one_line(text: str, limit: int) -> str:
    """Untrusted text made one printable line, cut to ``limit`` characters."""
    return "".join(char if char.isprintable() else " " for char in text[:limit])


def _answer(output: bytes) -> PdfResult:
    """Check the worker's answer field by field: it is untrusted input."""
    try:
        value: Any = json.loads(output)
    except (ValueError, UnicodeDecodeError):
        return _failure(PdfProblem.CRASHED, "the PDF worker gave no readable answer")
    if not isinstance(value, dict):
        return _failure(PdfProblem.CRASHED, "the PDF worker gave no readable answer")
    problem = value.get("problem")
    if problem is not None:
        detail = value.get("detail")
        if problem not in set(PdfProblem) or not isinstance(detail, str):
            return _failure(PdfProblem.CRASHED, "the PDF worker gave no readable answer")
        return _failure(PdfProblem(problem), _one_line(detail, _DETAIL_LIMIT))
    title, text = value.get("title"), value.get("text")
    pages, pages_read = value.get("pages"), value.get("pages_read")
    if not (
        isinstance(title, str)
        and isinstance(text, str)
        and type(pages) is int
        and type(pages_read) is int
        and 0 <= pages_read <= pages
    ):
        return _failure(PdfProblem.CRASHED, "the PDF worker gave no readable answer")
    return PdfText(title=title[:_TITLE_LIMIT], text=text, pages=pages, pages_read=pages_read)


def _exit_failure(returncode: int, limits: PdfLimits) -> PdfFailure:
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return _failure(PdfProblem.TIMEOUT, f"more than {limits.cpu_seconds} s of CPU time")
    if returncode in (-signal.SIGABRT, _EXIT_MEMORY):
        return _failure(
            PdfProblem.TOO_LARGE, f"more than {limits.memory_bytes >> 20} MiB of memory"
        )
    return _failure(PdfProblem.CRASHED, f"the PDF worker stopped (status {returncode})")


async def extract_pdf(data: bytes, limits: PdfLimits | None = None) -> PdfResult:
    """Read a PDF's title and text in a limited worker process.

    Args:
        data: The whole PDF file.
        limits: Memory, CPU and wall-clock limits (defaults: :class:`PdfLimits`).

    Returns:
        The text (see :class:`PdfText`) or why there is none: the document's own problem
        (no text layer, a password, truncated, damaged) or a limit it ran into
        (``too_large`` for memory or input size, ``timeout`` for CPU or wall-clock time).
        Never raises for anything the document does.

    Raises:
        PdfWorkerError: The worker process could not be started.

    # Security
    Rule: a PDF is parsed only in a separate, freshly executed process limited to
    ``memory_bytes`` of address space and ``cpu_seconds`` of CPU, killed after
    ``wall_seconds`` or as soon as the caller is cancelled; it cannot write files, open
    more than a few descriptors or start processes; at most ``max_output_bytes`` of its
    answer are read, as JSON (never unpickled).
    Threat: a crafted PDF (decompression bomb, parser bug, endless loop) aborting,
    exhausting or stalling the fetcher, or taking over the process that parses it and,
    from there, the fetcher.
    Callers may rely on: this returns within about ``wall_seconds``; no worker outlives
    the call, cancelled or not; the caller's memory holds at most the input and
    ``max_output_bytes`` of answer, checked field by field; a worker's crash is a
    :class:`PdfFailure` value.
    Proof: tests/fetcher/pdf/test_worker.py (decompression bomb refused ``too_large`` below
    the memory limit and read above it, deadline kill, cancellation kill, CPU, file and
    memory limits in force, answer cap, nonsense answers), tests/fetcher/pdf/test_quality.py
    (the corpus's hostile files) and tests/deploy/test_systemd.py (the same inside the
    fetcher unit's sandbox).
    """
    limits = limits or PdfLimits()
    if len(data) > limits.max_input_bytes:
        return _failure(
            PdfProblem.TOO_LARGE,
            f"{len(data)} bytes, more than {limits.max_input_bytes >> 20} MiB",
        )
    try:
        worker = await asyncio.create_subprocess_exec(
            *_worker_command(limits),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,  # a terminal's Ctrl-C goes to the caller only
            env={"LC_ALL": "C.UTF-8"},
        )
    except OSError as exc:
        raise PdfWorkerError(f"the PDF worker did not start: {exc}") from exc
    try:
        async with asyncio.timeout(limits.wall_seconds):
            output = await _exchange(worker, data, limits)
            if isinstance(output, bytes):
                await worker.wait()
    except TimeoutError:
        output = _failure(PdfProblem.TIMEOUT, f"no answer within {limits.wall_seconds:g} s")
    finally:
        # Also on cancellation: no worker outlives its caller.
        if worker.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.kill()
            await worker.wait()
    if isinstance(output, PdfFailure):
        return output
    status = await worker.wait()  # reaped above: this only reads the status
    if status != 0:
        return _exit_failure(status, limits)
    return _answer(output)


async def _send(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the document a chunk at a time (asyncio would copy it whole into its buffer)."""
    view = memoryview(data)
    try:
        for start in range(0, len(view), _PIPE_CHUNK):
            stdin.write(view[start : start + _PIPE_CHUNK])
            await stdin.drain()
        stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the worker stopped reading: its exit status says why


async def _exchange(
    worker: asyncio.subprocess.Process, data: bytes, limits: PdfLimits
) -> bytes | PdfFailure:
    """Send the document and collect the answer, up to the output cap.

    ``communicate()`` would do the same without the cap: a worker gone wrong could fill
    the caller's memory with output for as long as its CPU time lasts.
    """
    if worker.stdin is None or worker.stdout is None:  # pragma: no cover - PIPE asked for
        return _failure(PdfProblem.CRASHED, "the PDF worker has no pipes")
    sending = asyncio.create_task(_send(worker.stdin, data))
    chunks: list[bytes] = []
    received = 0
    try:
        while chunk := await worker.stdout.read(_PIPE_CHUNK):
            received += len(chunk)
            if received > limits.max_output_bytes:
                return _failure(
                    PdfProblem.CRASHED,
                    f"the PDF worker answered more than {limits.max_output_bytes >> 20} MiB",
                )
            chunks.append(chunk)
        await sending
    finally:
        sending.cancel()
        await asyncio.gather(sending, return_exceptions=True)
    return b"".join(chunks)


def _limit_self(memory_bytes: int, cpu_seconds: int) -> None:
    """Apply the worker's limits to its own process, before it reads the document.

    ``resource.prlimit`` always makes the prlimit64 system call, which the fetcher unit's
    filter allows; its ``SystemCallFilter=~@resources`` denies the setrlimit call, which a
    C library may use for ``resource.setrlimit`` (Debian 12's glibc happens to use
    prlimit64 for both; tests/deploy/test_systemd.py checks the filter). Lowering one's
    own limits needs no privilege either way.
    """
    limits = (
        (resource.RLIMIT_AS, memory_bytes, memory_bytes),
        # SIGXCPU at the soft limit ends the process; SIGKILL one second later if not.
        (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, 0, 0),
        (resource.RLIMIT_NOFILE, _WORKER_FILES, _WORKER_FILES),
        (resource.RLIMIT_NPROC, 0, 0),
    )
    for which, soft, hard in limits:
        resource.prlimit(0, which, (soft, hard))


def _serve(argv: list[str]) -> int:
    """The worker's side: limits, then one document from stdin, one answer to stdout."""
    memory_bytes, cpu_seconds, char_limit = (int(arg) for arg in argv)
    _limit_self(memory_bytes, cpu_seconds)
    from fetcher.pdf.text import read_pdf  # noqa: PLC0415 - only the worker loads PDFium

    data = sys.stdin.buffer.read()
    try:
        result = read_pdf(data, char_limit=char_limit or None)
    except MemoryError:
        os._exit(_EXIT_MEMORY)
    if isinstance(result, PdfText):
        answer: dict[str, object] = {
            "title": result.title,
            "text": result.text,
            "pages": result.pages,
            "pages_read": result.pages_read,
        }
    else:
        answer = {"problem": str(result.problem), "detail": result.detail}
    sys.stdout.write(json.dumps(answer, ensure_ascii=True))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1:]))
