"""The render worker pool: every limit stops the work for real (issue 15, item A)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fetcher.workers import MIB, Stopped, WorkerPool, WorkLimits
from testkit import tasks


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    # Wall-clock limit far above the CPU one: a loaded machine must still hit CPU first.
    limits = WorkLimits(cpu_seconds=1, memory_bytes=400 * MIB, wall_seconds=60.0)
    instance = WorkerPool(workers=1, limits=limits)
    try:
        yield instance
    finally:
        instance.close()


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


async def test_a_task_over_its_wall_clock_time_is_stopped(tmp_path: Path) -> None:
    quick = WorkerPool(workers=1, limits=WorkLimits(wall_seconds=0.5))
    try:
        result = await quick.run(tasks.tick, str(tmp_path / "ticks"), 30.0)
        assert isinstance(result, Stopped)
        assert result.why == "wall"
    finally:
        quick.close()


async def test_a_cancelled_task_really_stops(pool: WorkerPool, tmp_path: Path) -> None:
    ticks = tmp_path / "ticks"
    running = asyncio.create_task(pool.run(tasks.tick, str(ticks), 30.0))
    while not ticks.exists():
        await asyncio.sleep(0.01)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    # The worker is gone, not abandoned: once a fresh worker answers, the file is still.
    assert isinstance(await pool.run(tasks.pid), int)
    size = ticks.stat().st_size
    await asyncio.sleep(0.2)
    assert ticks.stat().st_size == size


async def test_a_bug_in_a_task_is_raised_to_the_caller(pool: WorkerPool) -> None:
    with pytest.raises(ValueError, match="a bug in a task"):
        await pool.run(tasks.fail)


async def test_tasks_past_the_workers_wait_and_saturation_shows(tmp_path: Path) -> None:
    two = WorkerPool(workers=2)
    try:
        ticks = [tmp_path / f"t{n}" for n in range(4)]
        running = [asyncio.create_task(two.run(tasks.tick, str(t), 0.5)) for t in ticks]
        await asyncio.sleep(0)
        assert (two.busy, two.waiting) == (2, 2)
        assert two.saturated
        results = await asyncio.gather(*running)
        assert all(isinstance(r, int) and r != os.getpid() for r in results)
        assert (two.busy, two.waiting, two.saturated) == (0, 0, False)
    finally:
        two.close()
