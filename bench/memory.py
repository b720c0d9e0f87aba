"""Benchmark: the memory a render worker really uses, against the limits it runs under.

Run from the repository root: ``python -m bench.memory``. The fetcher unit has
``MemoryMax=1G`` and ``OOMPolicy=stop`` (deploy/systemd/README.md, "Memory"), so the
render workers' address-space limit (``fetcher.isolation.workers.WorkLimits``) must leave room for
the PDF workers, the bodies held and the fetcher itself. Measured here, each page in a
fresh production render worker (forked from the forkserver that preloaded the reader,
production limits), as the service renders it:

- a fresh worker before its page: address space (``VmSize``), resident size (``VmRSS``)
  and the part of it that is its own (``Private_*`` of ``smaps_rollup``; the rest is
  shared with the forkserver and charged to the unit once);
- each hostile page of ``testkit.hostile`` and every page of the extraction corpus: the
  worker's peak address space (``VmPeak``) and peak resident size (``VmHWM``, reset when
  the task starts: a forked process inherits its parent's);
- the processes at rest beside the workers: the forkserver and multiprocessing's
  resource tracker, and a ``fetcher serve`` process just started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fetcher.crawl import WORKER_PRELOAD
from fetcher.html.links import site_of
from fetcher.isolation.workers import MIB, Stopped, WorkerPool, WorkLimits
from fetcher.worktasks import Page
from testkit.corpus import load_pages
from testkit.hostile import hostile_pages
from testkit.tasks import measured_read, private_kib, status

__all__ = ["main"]


def _mib(kib: float) -> str:
    return f"{kib / 1024:.0f}"


async def _render(pool: WorkerPool, body: bytes, url: str) -> dict[str, float] | str:
    page = Page(body, "text/html", None, url, site_of(url))
    result = await pool.run(measured_read, page)
    if isinstance(result, Stopped):
        return f"stopped ({result.why}): {result.detail}"
    assert isinstance(result, dict)
    return {key: float(value) for key, value in result.items() if isinstance(value, int | float)}


def _children(pid: int) -> list[int]:
    """Child processes of every thread of ``pid`` (the forkserver is started from one)."""
    return sorted(
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    )


def _command(pid: int) -> str:
    """What a child of the pool is: the forkserver, the resource tracker or a worker."""
    command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    if "fetcher.isolation.zygote" in command:
        return "a pool's worker zygote"
    for kind in ("forkserver", "resource_tracker"):
        if kind in command:
            return f"multiprocessing's {kind}"
    return "a render worker started ahead"


def _process(name: str, pid: int) -> str:
    """One line: a process's resident size, its own part of it, its address space."""
    fields = status(pid)
    rss, own, size = _mib(fields["VmRSS"]), _mib(private_kib(pid)), _mib(fields["VmSize"])
    return f"  {name:44} RSS {rss:>4}  own {own:>4}  VmSize {size:>4}"


def _serve_at_rest() -> str:
    """A ``fetcher serve`` process just started (its pools start on first use)."""
    with tempfile.TemporaryDirectory(prefix="tgm", dir="/tmp") as folder:
        socket_path = Path(folder) / "f.sock"
        process = subprocess.Popen(
            [sys.executable, "-m", "fetcher", "serve", "--listen", f"unix:{socket_path}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(600):
                if socket_path.exists():
                    break
                time.sleep(0.1)
            time.sleep(1.0)  # the health check's first round, logging set up
            return _process("fetcher serve, just started", process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=20)
            if process.returncode is None:
                process.kill()
                process.wait()


_COLUMNS = (
    ("size", "VmSize"),
    ("rss", "RSS"),
    ("private", "own"),
    ("peak_size", "VmPeak"),
    ("peak_rss", "VmHWM"),
)


def _row(name: str, row: dict[str, float] | str) -> str:
    if isinstance(row, str):
        return f"{name:34} {row}"
    figures = " ".join(f"{_mib(row[key]):>7}" for key, _ in _COLUMNS)
    return f"{name:34} {figures} {row['cpu']:7.2f}"


async def _hostile(production: WorkerPool, unbounded: WorkerPool) -> None:
    print("\nhostile pages (testkit.hostile), 2 MiB each; MiB, except CPU seconds. First under")
    print("the production limits, then, for a page they stopped, without them (30 s of CPU,")
    print("1 GiB): what it would have taken. VmSize, RSS, own: the fresh worker; VmPeak,")
    print("VmHWM: at its peak.")
    names = " ".join(f"{label:>7}" for _, label in _COLUMNS)
    print(f"{'page':34} {names} {'CPU':>7}")
    for name, body in hostile_pages().items():
        row = await _render(production, body, "https://example.com/")
        print(_row(name, row), flush=True)
        if isinstance(row, str):
            print(
                _row("  without the limits", await _render(unbounded, body, "https://example.com/"))
            )


async def _corpus(pool: WorkerPool) -> None:
    rows: list[dict[str, float]] = []
    stopped = []
    for page in load_pages():
        row = await _render(pool, page.html, page.url)
        if isinstance(row, str):
            stopped.append(f"{page.id}: {row}")
        else:
            rows.append(row)
    print(f"\nthe extraction corpus: {len(rows)} pages read, {len(stopped)} stopped")
    for line in stopped:
        print(f"  {line}")
    for key, label in _COLUMNS:
        values = sorted(row[key] for row in rows)
        median, largest = _mib(statistics.median(values)), _mib(values[-1])
        print(f"  {label:13} median {median:>4} MiB, largest {largest:>4} MiB")


async def _run() -> None:
    production = WorkerPool(workers=1, preload=WORKER_PRELOAD)
    unbounded = WorkerPool(
        workers=1,
        preload=WORKER_PRELOAD,
        limits=WorkLimits(cpu_seconds=30, memory_bytes=1024 * MIB, wall_seconds=120.0),
    )
    print(f"render worker limits: {production.limits}")
    try:
        await _hostile(production, unbounded)
        await _corpus(production)
        print("\nprocesses beside the workers (MiB):")
        for child in _children(os.getpid()):
            print(_process(_command(child), child))
    finally:
        await production.aclose()
        await unbounded.aclose()
    print(_serve_at_rest())


def main() -> None:
    """Print the tables."""
    asyncio.run(_run())


if __name__ == "__main__":
    main()
