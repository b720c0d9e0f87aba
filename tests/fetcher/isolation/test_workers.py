"""The render worker pool: every limit stops the work for real (issue 15, item A)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from fetcher.errors import IsolationError, TaskError
from fetcher.isolation import workers
from fetcher.isolation.workers import MIB, Stopped, Wire, WorkerPool, WorkLimits
from fetcher.worktasks import Page
from testkit import tasks


def json_value() -> Wire:
    return {"a": [1, "two", None, True, 2.5]}


@pytest.fixture
async def pool() -> AsyncIterator[WorkerPool]:
    # Wall-clock limit far above the CPU one: a loaded machine must still hit CPU first.
    limits = WorkLimits(cpu_seconds=1, memory_bytes=400 * MIB, wall_seconds=60.0)
    instance = WorkerPool(workers=1, limits=limits)
    try:
        yield instance
    finally:
        await instance.aclose()


async def test_a_task_within_its_limits_returns_its_result(pool: WorkerPool) -> None:
    used = await pool.run(tasks.spin, 0.05)
    assert isinstance(used, float)
    assert used >= 0.05


async def test_a_task_over_its_cpu_time_is_stopped_and_the_worker_replaced(
    pool: WorkerPool,
) -> None:
    first = await pool.run(tasks.pid)
    assert await pool.run(tasks.spin, 30.0) == Stopped("cpu", "over 1 s of CPU time")
    second = await pool.run(tasks.pid)
    assert isinstance(first, int)
    assert isinstance(second, int)
    assert first != second
    assert pool.stopped["cpu"] == 1


async def test_cpu_allowance_is_per_task_not_per_worker(pool: WorkerPool) -> None:
    # Three tasks of 0.6 s each: 1.8 s in one worker, each within its own second.
    for _ in range(3):
        assert not isinstance(await pool.run(tasks.spin, 0.6), Stopped)


async def test_a_task_over_its_memory_is_stopped(pool: WorkerPool) -> None:
    result = await pool.run(tasks.allocate, 600 * MIB)
    assert isinstance(result, Stopped)
    assert result.why == "memory"
    assert await pool.run(tasks.allocate, 10 * MIB) == 10 * MIB


async def test_a_task_over_its_wall_clock_time_is_stopped() -> None:
    quick = WorkerPool(workers=1, limits=WorkLimits(wall_seconds=0.5))
    try:
        result = await quick.run(tasks.sleep, 30.0)
        assert isinstance(result, Stopped)
        assert result.why == "wall"
    finally:
        await quick.aclose()


async def running_worker(pool: WorkerPool) -> int:
    """The process id of the one worker that runs a task (no spare beside it yet)."""
    while not (pool.busy == 1 and len(pool.worker_pids) == 1):
        await asyncio.sleep(0.01)
    (pid,) = pool.worker_pids
    return pid


def running(pid: int) -> bool:
    """Whether the process ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def gone(pid: int) -> bool:
    """Whether the process ``pid`` ends (or is only a zombie) within five seconds."""
    for _ in range(500):
        if not running(pid):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_a_cancelled_task_really_stops(pool: WorkerPool) -> None:
    running = asyncio.create_task(pool.run(tasks.sleep, 30.0))
    pid = await running_worker(pool)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    # The worker is gone, not abandoned.
    assert await gone(pid)
    assert isinstance(await pool.run(tasks.pid), int)


async def test_a_bug_in_a_task_is_raised_to_the_caller_as_text(pool: WorkerPool) -> None:
    with pytest.raises(TaskError, match="ValueError: a bug in a task") as raised:
        await pool.run(tasks.fail)
    assert 'raise ValueError("a bug in a task")' in raised.value.worker_traceback
    assert isinstance(await pool.run(tasks.pid), int)


async def test_values_come_back_as_json(pool: WorkerPool) -> None:
    assert await pool.run(json_value) == {"a": [1, "two", None, True, 2.5]}


async def test_a_worker_answer_is_never_unpickled(pool: WorkerPool, tmp_path: Path) -> None:
    """A value that runs code where it is unpickled must not reach the fetcher's process."""
    marker = tmp_path / "ran"
    with pytest.raises(TaskError, match="TypeError: Object of type Poison is not JSON"):
        # A task that breaks the Wire contract on purpose.
        await pool.run(tasks.poisoned, str(marker))  # type: ignore[arg-type]
    assert not marker.exists()


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


FORGED = [
    pytest.param(lambda path: _frame(pickle.dumps(tasks.Poison(path))), id="pickle"),
    pytest.param(lambda path: (2**31).to_bytes(4, "big") + b"{}", id="huge-length"),
    pytest.param(lambda path: _frame(b"[" * 200_000 + b"]" * 200_000), id="deep-json"),
    pytest.param(lambda path: _frame(b'{"value": 1, "error": "x"}'), id="two-answers"),
    pytest.param(lambda path: _frame(b'{"error": 7}'), id="error-not-text"),
    pytest.param(lambda path: _frame(b'{"other": 1}'), id="unknown-answer"),
    pytest.param(lambda path: _frame(b"\xff\xfe{}"), id="not-utf8"),
    pytest.param(lambda path: b"\x00\x00", id="cut-header"),
]


@pytest.mark.parametrize("forge", FORGED)
async def test_a_forged_answer_stops_the_task_and_the_worker(
    pool: WorkerPool, tmp_path: Path, forge: Callable[[str], bytes]
) -> None:
    """A subverted worker writes what it likes to its socket: the task ends as ``crashed``,
    nothing it wrote runs in the fetcher, and the next task gets a fresh worker."""
    marker = tmp_path / "ran"
    first = await pool.run(tasks.pid)
    result = await pool.run(tasks.forge_reply, forge(str(marker)))
    assert isinstance(result, Stopped)
    assert result.why == "crashed"
    assert not marker.exists()
    second = await pool.run(tasks.pid)
    assert isinstance(second, int)
    assert second != first


async def test_a_worker_cannot_start_processes(pool: WorkerPool) -> None:
    # RLIMIT_NPROC 0: killing a worker ends all of its work (root is exempt from the
    # limit, so the limit itself is what is checked).
    assert await pool.run(tasks.limits) == {"nproc": [0, 0], "core": [0, 0]}


async def test_tasks_past_the_workers_wait_and_saturation_shows() -> None:
    two = WorkerPool(workers=2)
    try:
        running = [asyncio.create_task(two.run(tasks.sleep, 0.5)) for _ in range(4)]
        await asyncio.sleep(0)
        assert (two.busy, two.waiting) == (2, 2)
        assert two.saturated
        results = await asyncio.gather(*running)
        assert all(isinstance(r, int) and r != os.getpid() for r in results)
        assert (two.busy, two.waiting, two.saturated) == (0, 0, False)
    finally:
        await two.aclose()


async def test_a_worker_that_crashes_costs_only_its_task(pool: WorkerPool) -> None:
    first = await pool.run(tasks.pid)
    assert await pool.run(tasks.crash) == Stopped("crashed", "the worker ended with status -11")
    second = await pool.run(tasks.pid)
    assert isinstance(second, int)
    assert second not in (first, os.getpid())
    assert pool.stopped["crashed"] == 1


def pid_of_pidfd(pidfd: int) -> int:
    """The process a pidfd names, as the kernel says (``Pid: -1`` once it is reaped)."""
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/self/fdinfo/{pidfd}").read_text().splitlines()
    )
    return int(fields["Pid"])


async def test_a_worker_is_killed_by_its_pidfd(pool: WorkerPool) -> None:
    """No signal by process id: the pid of a reaped worker may be another process's."""
    await pool.run(tasks.pid)  # a spare is forked ahead
    for _ in range(500):
        if pool._spares:
            break
        await asyncio.sleep(0.01)
    (spare,) = pool._spares
    assert pid_of_pidfd(spare.pidfd) == spare.pid
    spare.kill()
    assert await asyncio.wait_for(asyncio.shield(spare.ended), 5) == -9
    assert pid_of_pidfd(spare.pidfd) == -1  # reaped: the pidfd names no process now
    pool._spares.remove(spare)
    spare.release()
    assert spare.pidfd == -1
    spare.kill()  # released: nothing, whatever the old number names now


async def test_a_read_cancelled_while_its_worker_ends_lets_the_worker_go(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller that gives up while the pool waits for a hung-up worker's status: the
    worker is killed and its pidfd and channel closed all the same (no descriptor kept
    for the fetcher's life, no worker left running until the pool closes)."""
    monkeypatch.setattr(workers, "_EXIT_WAIT", 60.0)  # the wait the caller gives up in
    reading = asyncio.create_task(pool.run(tasks.hang_up, 60.0))
    pid = await running_worker(pool)
    (worker,) = pool._all
    for _ in range(500):  # until the worker has hung up and the pool waits for its end
        try:
            if worker.channel.recv(1, socket.MSG_PEEK) == b"":
                break
        except BlockingIOError:
            pass
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert await gone(pid)
    for _ in range(500):
        if worker.pidfd == -1:
            break
        await asyncio.sleep(0.01)
    assert worker.pidfd == -1
    assert worker.channel.fileno() == -1


async def test_a_pool_closed_under_a_running_task_lets_its_worker_go() -> None:
    """The task's own coroutine lets its worker go when the pool closes under it, whatever
    the zygote's going makes it raise: no pidfd or channel outlives the pool."""
    pool = WorkerPool(workers=1, limits=WorkLimits(wall_seconds=60.0))
    reading = asyncio.create_task(pool.run(tasks.sleep, 60.0))
    pid = await running_worker(pool)
    (worker,) = pool._all
    await pool.aclose()
    await asyncio.gather(reading, return_exceptions=True)
    assert await gone(pid)
    assert worker.pidfd == -1
    assert worker.channel.fileno() == -1


async def test_a_spare_runs_the_warm_up_before_its_task() -> None:
    """Only a worker forked ahead warms up; one forked for a waiting task starts on it."""
    pool = WorkerPool(workers=1, warm_up="testkit.tasks:warm")
    try:
        # The first task finds no spare: its worker is forked for it, cold.
        assert await pool.run(tasks.warmed) is False
        for _ in range(500):  # the spare forked ahead once a place is free
            if pool._spares:
                break
            await asyncio.sleep(0.01)
        assert await pool.run(tasks.warmed) is True
    finally:
        await pool.aclose()
    cold = WorkerPool(workers=1)
    try:
        await cold.run(tasks.pid)
        await asyncio.sleep(0.2)
        assert await cold.run(tasks.warmed) is False  # no warm-up named: none runs
    finally:
        await cold.aclose()


async def test_no_worker_sees_a_second_task(pool: WorkerPool) -> None:
    """A worker that one page subverted never renders another: one process per task."""
    pids = [await pool.run(tasks.pid) for _ in range(4)]
    assert len(set(pids)) == 4
    assert os.getpid() not in pids


async def test_a_task_may_import_a_module_never_compiled() -> None:
    """A worker may open files for reading only: a module without its bytecode cache is
    read and compiled, never cached (the cache is a file write, which the filter kills).
    In production every module a task needs is preloaded; a first import in a worker
    (a lazily loaded codec, a task module of a tool or bench) must not kill it."""
    name = f"_fresh_{os.getpid()}_{id(object())}"
    source = Path(tasks.__file__).parent / f"{name}.py"
    source.write_text("def answer() -> int:\n    return 42\n")
    pool = WorkerPool(workers=1)
    try:
        assert await pool.run(tasks.import_fresh, f"testkit.{name}") == 42
    finally:
        await pool.aclose()
        source.unlink()
        for cached in (source.parent / "__pycache__").glob(f"{name}.*"):
            cached.unlink()
    assert not list((source.parent / "__pycache__").glob(f"{name}.*"))


async def test_the_benchmarks_tasks_run_in_a_confined_worker() -> None:
    """bench.memory and bench.hostile measure inside real workers: their tasks must be
    importable by one (a task module that imports the crawl got every worker killed).
    This module's own tasks run in workers too, so the crawl is imported here only."""
    from fetcher.crawl import WORKER_PRELOAD

    page = Page(
        b"<html><body><p>Hello.</p></body></html>", "text/html", None, "https://a.test/", "a.test"
    )
    pool = WorkerPool(workers=1, preload=WORKER_PRELOAD)
    try:
        measured = await pool.run(tasks.measured_read, page)
        cpu_and_peak = await pool.run(tasks.measure, page)
    finally:
        await pool.aclose()
    assert isinstance(measured, dict)
    kib = {name: value for name, value in measured.items() if isinstance(value, int)}
    assert kib["size"] > 0
    assert kib["peak_rss"] >= kib["rss"] > 0
    assert isinstance(cpu_and_peak, list)
    assert len(cpu_and_peak) == 2


async def test_spares_that_cannot_start_once_the_zygote_is_gone_raise_nothing_unseen() -> None:
    """Spares are forked in the background: with the zygote killed, their forks fail, and
    that must end quietly (the next task's own fork raises), never as a task exception
    nobody retrieves (a traceback in the log)."""
    pool = WorkerPool(workers=2)
    try:
        await pool.run(tasks.pid)
        pid = pool._zygote.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for _ in range(5):  # each finished task forks spares ahead
            with contextlib.suppress(IsolationError):
                await pool.run(tasks.pid)
        background = list(pool._background)
        results = await asyncio.gather(*background, return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
    finally:
        await pool.aclose()
