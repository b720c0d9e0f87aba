"""The PDF worker process: limits that hold, and answers checked as untrusted input.

Each test starts real worker processes (``python -I -m fetcher.pdf.worker``); the only
double is the JSON a worker might answer, fed to the parent's checker directly.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fetcher.errors import PdfWorkerError
from fetcher.pdf.result import MIB, PdfFailure, PdfLimits, PdfProblem, PdfText, is_pdf
from fetcher.pdf.worker import _answer, _exit_failure, extract_pdf
from tests.fetcher.pdf.maker import Text, bomb_pdf, make_pdf

SIMPLE = make_pdf([[Text(72, 600, b"Hello from a worker process.")]], title="Worker")


@pytest.fixture(scope="module")
def bomb() -> bytes:
    # About 190 KB that inflate to 192 MiB of blanks after one line of text.
    return bomb_pdf(192 * MIB)


async def test_the_worker_reads_a_pdf() -> None:
    result = await extract_pdf(SIMPLE)
    assert result == PdfText(
        title="Worker", text="Hello from a worker process.", pages=1, pages_read=1
    )


async def test_a_decompression_bomb_is_refused_at_the_memory_limit(bomb: bytes) -> None:
    result = await extract_pdf(bomb, PdfLimits(memory_bytes=128 * MIB))
    assert isinstance(result, PdfFailure)
    assert result.problem is PdfProblem.TOO_LARGE


async def test_the_same_bomb_is_read_below_a_higher_limit(bomb: bytes) -> None:
    # The other side of the boundary: with room for the inflated stream, the line is read.
    result = await extract_pdf(bomb, PdfLimits(memory_bytes=1024 * MIB))
    assert isinstance(result, PdfText)
    assert result.text == "Only this line is text."


async def test_a_worker_past_its_deadline_is_killed() -> None:
    # No worker can start Python, load PDFium and answer within a millisecond.
    result = await extract_pdf(SIMPLE, PdfLimits(wall_seconds=0.001))
    assert isinstance(result, PdfFailure)
    assert result.problem is PdfProblem.TIMEOUT


@pytest.mark.parametrize(
    ("size", "problem"),
    [
        pytest.param(1024, None, id="at-the-limit"),
        pytest.param(1025, PdfProblem.TOO_LARGE, id="one-byte-over"),
    ],
)
async def test_input_over_the_limit_is_refused_before_any_worker(
    size: int, problem: PdfProblem | None
) -> None:
    data = SIMPLE + b" " * (size - len(SIMPLE))
    result = await extract_pdf(data, PdfLimits(max_input_bytes=1024))
    if problem is None:
        assert isinstance(result, PdfText)
    else:
        assert isinstance(result, PdfFailure)
        assert result.problem is problem


@pytest.mark.parametrize(
    ("cap", "problem"),
    [
        pytest.param(1 << 20, None, id="answer-within-the-cap"),
        pytest.param(40, PdfProblem.CRASHED, id="answer-over-the-cap"),
    ],
)
async def test_the_answer_is_read_up_to_a_cap(cap: int, problem: PdfProblem | None) -> None:
    result = await extract_pdf(SIMPLE, PdfLimits(max_output_bytes=cap))
    if problem is None:
        assert isinstance(result, PdfText)
    else:
        assert isinstance(result, PdfFailure)
        assert result.problem is problem


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        pytest.param(-signal.SIGXCPU, PdfProblem.TIMEOUT, id="cpu-soft-limit"),
        pytest.param(-signal.SIGKILL, PdfProblem.TIMEOUT, id="cpu-hard-limit"),
        pytest.param(-signal.SIGABRT, PdfProblem.TOO_LARGE, id="pdfium-abort"),
        pytest.param(86, PdfProblem.TOO_LARGE, id="python-memory-error"),
        pytest.param(-signal.SIGSEGV, PdfProblem.CRASHED, id="segfault"),
        pytest.param(1, PdfProblem.CRASHED, id="exception"),
    ],
)
def test_worker_deaths_are_named(status: int, problem: PdfProblem) -> None:
    assert _exit_failure(status, PdfLimits()).problem is problem


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(b"", id="nothing"),
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"[]", id="not-an-object"),
        pytest.param(b'{"problem": "exploded", "detail": "x"}', id="unknown-problem"),
        pytest.param(b'{"problem": "no_text", "detail": 3}', id="detail-not-text"),
        pytest.param(b'{"title": "t", "text": 1, "pages": 1, "pages_read": 1}', id="text-not-str"),
        pytest.param(b'{"title": "t", "text": "", "pages": 1, "pages_read": 2}', id="more-read"),
        pytest.param(b'{"title": "t", "text": "", "pages": true, "pages_read": 1}', id="bool"),
        pytest.param(b'{"title": "t", "text": ""}', id="missing-pages"),
    ],
)
def test_nonsense_answers_are_crashes(answer: bytes) -> None:
    result = _answer(answer)
    assert isinstance(result, PdfFailure)
    assert result.problem is PdfProblem.CRASHED


def test_a_good_answer_is_taken_and_its_title_bounded() -> None:
    answer = b'{"title": "%s", "text": "x", "pages": 2, "pages_read": 1}' % (b"t" * 500)
    assert _answer(answer) == PdfText(title="t" * 300, text="x", pages=2, pages_read=1)


def limited(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a Python that applied the worker's own limits first."""
    program = "from fetcher.pdf.worker import _limit_self\n_limit_self(256 << 20, 1)\n" + code
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )


def test_the_worker_cannot_write_files(tmp_path: Path) -> None:
    done = limited("with open('out.txt', 'w') as out:\n    out.write('x' * 10)", tmp_path)
    assert done.returncode != 0
    assert "File too large" in done.stderr
    assert (tmp_path / "out.txt").read_text() == ""


def test_the_worker_is_stopped_after_its_cpu_seconds(tmp_path: Path) -> None:
    done = limited("while True: pass", tmp_path)
    assert done.returncode in (-signal.SIGXCPU, -signal.SIGKILL)


def test_the_worker_cannot_map_more_than_its_memory(tmp_path: Path) -> None:
    done = limited("b = bytearray(300 << 20)", tmp_path)
    assert done.returncode != 0
    assert "MemoryError" in done.stderr


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(b"%PDF-1.7\n", True, id="header"),
        pytest.param(b"\x00" * 1000 + b"%PDF-1.4", True, id="header-after-junk"),
        pytest.param(b"\x00" * 1020 + b"%PDF-1.4", False, id="header-too-late"),
        pytest.param(b"<html>%PDF-</html>"[:6], False, id="html"),
    ],
)
def test_pdfs_are_known_by_their_content(body: bytes, expected: bool) -> None:
    assert is_pdf(body) is expected


def pdf_workers() -> dict[int, int]:
    """This process's PDF worker children: pid → resident memory in KiB."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["PPid"]) == os.getpid() and b"fetcher.pdf.worker" in command:
            found[int(entry.name)] = int(fields.get("VmRSS", "0 kB").split()[0])
    return found


async def test_cancelling_the_caller_kills_the_worker(bomb: bytes) -> None:
    # The bomb read with room to inflate takes a while: cancel it halfway, once the worker
    # is visibly at work (inflating past 64 MiB), and the worker must be gone.
    reading = asyncio.create_task(extract_pdf(bomb, PdfLimits(memory_bytes=1024 * MIB)))
    busy: dict[int, int] = {}
    while not reading.done() and not (
        busy := {p: k for p, k in pdf_workers().items() if k > 65536}
    ):
        await asyncio.sleep(0.005)
    assert busy, "the worker finished before it could be cancelled"
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert not any(alive(pid) for pid in busy)  # killed, and reaped
    assert pdf_workers() == {}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_reads_run_side_by_side_on_one_event_loop() -> None:
    first, second = await asyncio.gather(extract_pdf(SIMPLE), extract_pdf(SIMPLE))
    assert (
        first
        == second
        == PdfText(title="Worker", text="Hello from a worker process.", pages=1, pages_read=1)
    )


async def test_a_worker_that_cannot_start_is_the_fetchers_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    with pytest.raises(PdfWorkerError, match="did not start"):
        await extract_pdf(SIMPLE)


async def test_a_worker_that_dies_before_reading_its_input_is_a_failure_value() -> None:
    # 24 MiB of address space is too little for Python to import PDFium: the worker dies
    # before it reads a byte, and the megabyte being written to it meets a closed pipe.
    data = SIMPLE + b" " * (1 << 20)
    result = await extract_pdf(data, PdfLimits(memory_bytes=24 * MIB))
    assert isinstance(result, PdfFailure)
