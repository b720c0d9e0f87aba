"""The PDF worker process: limits that hold, and answers checked as untrusted input.

Each test starts real worker processes (a PDF pool's, ``fetcher.isolation.zygote``); the only
double is the JSON a worker might answer, fed to the parent's checker directly.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fetcher.errors import PdfWorkerError
from fetcher.isolation.workers import WorkerPool
from fetcher.isolation.zygote import EXIT_MEMORY, Wire, WorkLimits, stopped_by
from fetcher.pdf.result import MIB, PdfFailure, PdfLimits, PdfProblem, PdfText, is_pdf
from fetcher.pdf.worker import _stop_failure, answer_of, extract_pdf, pdf_pool
from testkit import tasks
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
    # No worker can be forked, confined and answer within a millisecond.
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
        pytest.param(-signal.SIGKILL, PdfProblem.TOO_LARGE, id="kernel-memory-kill"),
        pytest.param(-signal.SIGABRT, PdfProblem.TOO_LARGE, id="pdfium-abort"),
        pytest.param(EXIT_MEMORY, PdfProblem.TOO_LARGE, id="python-memory-error"),
        pytest.param(-signal.SIGSYS, PdfProblem.CONFINED, id="refused-system-call"),
        pytest.param(-signal.SIGSEGV, PdfProblem.CRASHED, id="segfault"),
        pytest.param(1, PdfProblem.CRASHED, id="exception"),
    ],
)
def test_worker_deaths_are_named(status: int, problem: PdfProblem) -> None:
    limits = WorkLimits()
    assert _stop_failure(stopped_by(status, limits), limits).problem is problem


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(None, id="nothing"),
        pytest.param("not an object", id="text"),
        pytest.param([], id="not-an-object"),
        pytest.param({"problem": "exploded", "detail": "x"}, id="unknown-problem"),
        pytest.param({"problem": "confined", "detail": "x"}, id="problem-only-an-end-names"),
        pytest.param({"problem": "no_text", "detail": 3}, id="detail-not-text"),
        pytest.param({"title": "t", "text": 1, "pages": 1, "pages_read": 1}, id="text-not-str"),
        pytest.param({"title": "t", "text": "", "pages": 1, "pages_read": 2}, id="more-read"),
        pytest.param({"title": "t", "text": "", "pages": True, "pages_read": 1}, id="bool"),
        pytest.param({"title": "t", "text": ""}, id="missing-pages"),
    ],
)
def test_nonsense_answers_are_crashes(answer: Wire) -> None:
    result = answer_of(answer)
    assert isinstance(result, PdfFailure)
    assert result.problem is PdfProblem.CRASHED


def test_a_good_answer_is_taken_and_its_title_bounded() -> None:
    answer: Wire = {"title": "t" * 500, "text": "x", "pages": 2, "pages_read": 1}
    assert answer_of(answer) == PdfText(title="t" * 300, text="x", pages=2, pages_read=1)


def test_a_problem_the_reader_reports_is_kept_on_one_line() -> None:
    answer: Wire = {"problem": "damaged", "detail": "bad\nxref"}
    assert answer_of(answer) == PdfFailure(PdfProblem.DAMAGED, "bad xref")


@pytest.fixture
async def limited() -> AsyncIterator[WorkerPool]:
    """A PDF pool with the default limits but one second of CPU."""
    pool = pdf_pool(PdfLimits(cpu_seconds=1, wall_seconds=30))
    try:
        yield pool
    finally:
        await pool.aclose()


async def test_the_worker_cannot_write_files(limited: WorkerPool, tmp_path: Path) -> None:
    # Opening for writing is refused by the worker's filter, which kills it.
    out = tmp_path / "out.txt"
    result = await limited.run(tasks.record_pid, str(out))
    assert _stop_failure(result, limited.limits).problem is PdfProblem.CONFINED  # type: ignore[arg-type]
    assert not out.exists()


async def test_the_worker_is_stopped_after_its_cpu_seconds(limited: WorkerPool) -> None:
    result = await limited.run(tasks.spin, 30.0)
    assert _stop_failure(result, limited.limits).problem is PdfProblem.TIMEOUT  # type: ignore[arg-type]


async def test_the_worker_cannot_map_more_than_its_memory(limited: WorkerPool) -> None:
    result = await limited.run(tasks.allocate, 300 * MIB)
    assert _stop_failure(result, limited.limits).problem is PdfProblem.TOO_LARGE  # type: ignore[arg-type]
    assert await limited.run(tasks.allocate, 100 * MIB) == 100 * MIB


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


def pdf_workers(pool: WorkerPool) -> dict[int, int]:
    """The pool's live worker processes: pid → resident memory in KiB."""
    found = {}
    for pid in pool.worker_pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields["State"].split()[0] not in ("Z", "X"):
            found[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    return found


async def test_cancelling_the_caller_kills_the_worker(bomb: bytes) -> None:
    # The bomb read with room to inflate takes a while: cancel it halfway, once the worker
    # is visibly at work (inflating past 64 MiB), and the worker must be gone.
    limits = PdfLimits(memory_bytes=1024 * MIB)
    pool = pdf_pool(limits)
    try:
        reading = asyncio.create_task(extract_pdf(bomb, limits, pool=pool))
        busy: dict[int, int] = {}
        while not reading.done() and not (
            busy := {p: k for p, k in pdf_workers(pool).items() if k > 65536}
        ):
            await asyncio.sleep(0.005)
        assert busy, "the worker finished before it could be cancelled"
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        for _ in range(200):
            if not any(alive(pid) for pid in busy):
                break
            await asyncio.sleep(0.01)
        assert not any(alive(pid) for pid in busy)  # killed, and reaped
        assert not set(pdf_workers(pool)) & set(busy)
    finally:
        await pool.aclose()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


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
    # 24 MiB of address space is less than the zygote's own: the worker fails its first
    # allocation, and the megabyte being written to it meets a closed channel.
    data = SIMPLE + b" " * (1 << 20)
    result = await extract_pdf(data, PdfLimits(memory_bytes=24 * MIB))
    assert isinstance(result, PdfFailure)
