"""Hostile pages against the reader: CPU and peak memory of one render, side by side with
a plain page of the same size (issue 15, item A).

Each page is rendered in a fresh render worker (``fetcher.isolation.workers``, production limits),
which reports its own CPU time and peak RSS. The first reader took 51 s of CPU on the
nested-landmark page; a linear reader takes about what a plain page of the same size takes.
"""

from __future__ import annotations

import asyncio

from fetcher.crawl import WORKER_PRELOAD
from fetcher.isolation.workers import Stopped, WorkerPool
from fetcher.worktasks import Page
from testkit.hostile import NESTED_SHAPES, nested, nested_landmarks
from testkit.tasks import measure


async def _run() -> None:
    bodies = {name: nested(*tags) for name, tags in NESTED_SHAPES.items()}
    bodies["nested <nav><main> (issue 15)"] = nested_landmarks()
    print(f"{'page (2 MiB)':34} {'CPU s':>7} {'peak MiB':>9} {'CPU vs plain':>13}")
    plain_cpu = 0.0
    for name, body in bodies.items():
        pool = WorkerPool(workers=1, preload=WORKER_PRELOAD)  # a fresh worker: its own peak
        try:
            page = Page(body, "text/html", "utf-8", "https://example.com/", "example.com")
            result = await pool.run(measure, page)
        finally:
            await pool.aclose()
        if isinstance(result, Stopped):
            print(f"{name:34} stopped: {result.detail}")
            continue
        assert isinstance(result, list)
        cpu, peak = (float(value) for value in result if isinstance(value, int | float))
        plain_cpu = plain_cpu or cpu
        print(f"{name:34} {cpu:7.2f} {peak:9.0f} {cpu / plain_cpu:12.1f}x")


def main() -> None:
    """Print the table."""
    asyncio.run(_run())


if __name__ == "__main__":
    main()
