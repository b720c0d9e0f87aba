"""Where a fresh worker's time goes (issue 23): spawn, imports, first-use caches, fork,
confinement; and how long a worker of each pool takes from request to answer.

Printed, each the median of its repetitions, wall clock and (where it is one process's
own) CPU time:

- a new interpreter (``python -I -c pass``), then with the HTML reader's imports, PDFium's,
  both, and the HTML reader warmed (its first page: the Public Suffix List);
- in one warmed process: the first and a later page rendered, a fork (and the child's
  exit) of a process that holds the HTML reader, PDFium, or the whole crawl stack, the
  seccomp filter built and loaded in a child, or prebuilt in the parent and loaded;
- through the real pools (``fetcher.isolation.zygote``): a confined worker of the render pool and
  of the PDF pool, from the request to its answer of a trivial task, with no spare
  forked ahead (the worst case: a task that finds no spare) and with one.

The ratios to read: fork against spawn, and a worker from its zygote against a new
interpreter with the same imports (the old PDF worker). Run:
``.venv/bin/python -m bench.worker_start``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from fetcher.crawl import WORKER_PRELOAD
from fetcher.isolation.workers import WorkerPool
from fetcher.pdf.result import PdfLimits
from fetcher.pdf.worker import pdf_pool

REPS = 9
FORKS = 40


def _spawn_ms(code: str) -> float:
    times = []
    for _ in range(REPS):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-c", code], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def _fork_in(preload: str, child: str = "pass") -> tuple[float, float]:
    """Forks of a process that ran ``preload``, each child running ``child``: wall ms and
    CPU ms (parent and child) per fork, measured in that process."""
    program = f"""
import gc, os, resource, time
{preload}
gc.freeze()
def cpu(who):
    u = resource.getrusage(who); return u.ru_utime + u.ru_stime
walls = []
c0, s0 = cpu(resource.RUSAGE_CHILDREN), cpu(resource.RUSAGE_SELF)
for _ in range({FORKS}):
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        {child}
        os._exit(0)
    os.waitpid(pid, 0)
    walls.append(time.perf_counter() - t)
walls.sort()
cpu_ms = (cpu(resource.RUSAGE_CHILDREN) - c0 + cpu(resource.RUSAGE_SELF) - s0) / {FORKS} * 1000
print(walls[len(walls) // 2] * 1000, cpu_ms)
"""
    done = subprocess.run(
        [sys.executable, "-c", program], check=True, capture_output=True, text=True
    )
    wall, cpu = (float(field) for field in done.stdout.split())
    return wall, cpu


WARM = (
    "from fetcher.html.extract import read_document\n"
    "read_document(b'<title>w</title><main><p>w <a href=/a>a</a></p></main>', "
    "content_type='text/html', charset=None, url='https://example.com/', site='example.com')"
)


def _first_pages() -> tuple[float, float]:
    program = (
        "import time\nfrom fetcher.html.extract import read_document\n"
        "def page():\n    t = time.perf_counter()\n"
        "    read_document(b'<title>w</title><main><p>w <a href=/a>a</a></p></main>', "
        "content_type='text/html', charset=None, url='https://example.com/', "
        "site='example.com')\n    return (time.perf_counter() - t) * 1000\n"
        "print(page(), page())"
    )
    done = subprocess.run([sys.executable, "-c", program], check=True, capture_output=True)
    first, later = (float(field) for field in done.stdout.split())
    return first, later


async def _pool_ms(make: Callable[[], WorkerPool], *, spare: bool) -> float:
    """Median wall ms from a task's request to its answer."""
    pool = make()
    walls = []
    try:
        await pool.run(os.getpid)  # the zygote started and warmed
        for _ in range(REPS * 3):
            if not spare:
                # Take the spare away: the next task forks its own worker.
                await pool.run(os.getpid)
                while pool._spares:
                    pool._retire_later(pool._spares.pop())
            else:
                await asyncio.sleep(0.05)  # the spare is forked and confined by now
            started = time.perf_counter()
            await pool.run(os.getpid)
            walls.append(time.perf_counter() - started)
    finally:
        await pool.aclose()
    return statistics.median(walls) * 1000


def main() -> None:
    """Measure and print the table."""
    rows: list[tuple[str, str]] = []
    bare = _spawn_ms("pass")
    rows.append(("new interpreter (`python -I -c pass`)", f"{bare:.0f} ms"))
    html = _spawn_ms("import fetcher.html.extract")
    rows.append(("+ the HTML reader's imports", f"{html:.0f} ms"))
    pdf = _spawn_ms("import fetcher.pdf.text")
    rows.append(("+ PDFium's imports (the old PDF worker's start)", f"{pdf:.0f} ms"))
    rows.append(("+ the HTML reader warmed (first page)", f"{_spawn_ms(WARM):.0f} ms"))
    first, later = _first_pages()
    rows.append(("first page in a process / a later one", f"{first:.1f} ms / {later:.2f} ms"))
    for label, preload in (
        ("bare interpreter", "pass"),
        ("HTML reader, warmed (the render zygote)", WARM),
        ("PDFium (the PDF zygote)", "import fetcher.pdf.text"),
        ("the whole crawl stack (the old forkserver's preload)", f"import fetcher.crawl\n{WARM}"),
    ):
        wall, cpu = _fork_in(preload)
        rows.append((f"fork + exit of {label}", f"{wall:.2f} ms wall, {cpu:.2f} ms CPU"))
    build = "from fetcher.isolation.zygote import worker_filter"
    wall, cpu = _fork_in(f"{WARM}\n{build}", "worker_filter(os.getpid()).load()")
    rows.append(("... + filter built and loaded in the child", f"{wall:.2f} ms, {cpu:.2f} ms CPU"))
    prebuilt = "from fetcher.isolation.zygote import base_filter, with_self\nrules = base_filter()"
    wall, cpu = _fork_in(f"{WARM}\n{prebuilt}", "with_self(rules, os.getpid()).load()")
    rows.append(("... + filter prebuilt, loaded in the child", f"{wall:.2f} ms, {cpu:.2f} ms CPU"))
    forked = ready = 0.0
    for label, make in (
        ("render pool", lambda: WorkerPool(workers=1, preload=WORKER_PRELOAD)),
        ("PDF pool", lambda: pdf_pool(PdfLimits())),
    ):
        forked = asyncio.run(_pool_ms(make, spare=False))
        ready = asyncio.run(_pool_ms(make, spare=True))
        rows.append(
            (
                f"{label}: a confined worker's answer, forked for it / a spare",
                f"{forked:.1f} ms / {ready:.1f} ms",
            )
        )
    print("| step | time (median) |")
    print("|---|---|")
    for step, value in rows:
        print(f"| {step} | {value} |")
    print(
        f"\nA PDF worker ready: {forked:.1f} ms forked for its task, {ready:.1f} ms as a spare, "
        f"against {pdf:.0f} ms for a new interpreter that imports PDFium (the old worker): "
        f"ratio {forked / pdf:.2f} (target: 30 ms or less)."
    )


if __name__ == "__main__":
    main()
