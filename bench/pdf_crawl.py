"""Benchmark: what reading a PDF through the crawl costs, side by side with its parts.

Run from the repository root: ``python -m bench.pdf_crawl``. Every quality PDF of the
shared corpus is served by a local HTTPS origin and read three ways, interleaved in each
round so background load hits them alike:

- ``crawl``: a read of the PDF's address by the fetcher's :class:`~fetcher.crawl.Crawler`
  (the safe download, then the PDF reader's worker process), as the service does it;
- ``worker``: :func:`fetcher.pdf.worker.extract_pdf` on the bytes (a fresh worker process);
- ``in-process``: :func:`fetcher.pdf.text.read_pdf` in this process (no worker, no limits).

Printed: the median milliseconds per document of each and the ratios crawl/worker (what
the download and the crawl add) and worker/in-process (what the process of its own
costs); then eight PDFs read at once through one crawler with ``pdf_workers`` = 2; then
the memory: each worker's peak resident size (median and largest), and this process's.
"""

from __future__ import annotations

import asyncio
import resource
import ssl
import statistics
import subprocess
import sys
import time
from ipaddress import ip_network

import trustme

from fetcher.crawl import WORKER_PRELOAD, Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.net.download import Downloader, Limits
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.pdf.reader import PdfReader
from fetcher.pdf.result import PdfLimits
from fetcher.pdf.text import read_pdf
from fetcher.pdf.worker import extract_pdf
from fetcher.report import Report
from testkit.origin import Origin, Reply
from testkit.pdf_corpus import load_cases

__all__ = ["main"]

ROUNDS = 3
AT_ONCE = 8


# The worker program as the fetcher starts it, then its own peak resident size (VmHWM:
# counted from its exec, unlike ru_maxrss, which keeps the forked parent's size).
_MEASURED_WORKER = (
    "import runpy, sys\n"
    "try:\n"
    "    runpy.run_module('fetcher.pdf.worker', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "with open('/proc/self/status') as status:\n"
    "    sys.stderr.write(next(line for line in status if line.startswith('VmHWM')))\n"
)


def worker_peak_mib(data: bytes, limits: PdfLimits) -> int:
    """The peak resident memory of a PDF worker reading ``data``, in MiB."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", _MEASURED_WORKER, str(limits.memory_bytes),
         str(limits.cpu_seconds), str(limits.char_limit or 0)],
        input=data, capture_output=True, check=True, env={"LC_ALL": "C.UTF-8"},
    )  # fmt: skip
    return int(done.stderr.split()[-2]) // 1024


def _peak_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


async def run() -> list[str]:
    cases = [case for case in load_cases() if case.kind == "quality"]
    ca = trustme.CA()
    context = ssl.create_default_context()
    ca.configure_trust(context)
    origin = Origin(ca)
    await origin.start()
    for case in cases:
        origin.routes[f"/{case.id}.pdf"] = Reply(
            headers=(("Content-Type", "application/pdf"),), body=case.data
        )
    policy = Policy(ports=frozenset({origin.port}), exempt=(ip_network("127.0.0.1/32"),))
    resolver = StaticResolver({"origin.test": ["127.0.0.1"]})
    pool = WorkerPool(workers=2, preload=WORKER_PRELOAD)
    times: dict[str, list[float]] = {"crawl": [], "worker": [], "in-process": []}
    lines = []
    try:
        async with Downloader(
            policy=policy, resolver=resolver, ssl_context=context, limits=Limits()
        ) as downloader:
            crawl = Crawler(downloader=downloader, pool=pool, pdfs=PdfReader(workers=2))

            async def through_crawl(case_id: str) -> Report:
                report = await crawl(origin.url(f"/{case_id}.pdf"), allowed_hosts=["origin.test"])
                assert report.pages, report.failures
                return report

            await through_crawl(cases[0].id)  # warm the connection pool
            for _ in range(ROUNDS):
                for case in cases:
                    started = time.perf_counter()
                    await through_crawl(case.id)
                    times["crawl"].append(time.perf_counter() - started)
                    started = time.perf_counter()
                    await extract_pdf(case.data, crawl.pdfs.limits)
                    times["worker"].append(time.perf_counter() - started)
                    started = time.perf_counter()
                    read_pdf(case.data, char_limit=crawl.pdfs.limits.char_limit)
                    times["in-process"].append(time.perf_counter() - started)
            batch = [case.id for case in cases[:AT_ONCE]]
            started = time.perf_counter()
            await asyncio.gather(*(through_crawl(case_id) for case_id in batch))
            together = time.perf_counter() - started
    finally:
        pool.close()
        await origin.stop()
    median = {name: 1000 * statistics.median(values) for name, values in times.items()}
    lines.append(
        f"{len(cases)} quality PDFs ({sum(len(c.data) for c in cases) // 1024} KiB), "
        f"{ROUNDS} rounds; median ms per document:"
    )
    lines.append("| crawl | worker | in-process | crawl / worker | worker / in-process |")
    lines.append("|---|---|---|---|---|")
    lines.append(
        f"| {median['crawl']:.0f} | {median['worker']:.0f} | {median['in-process']:.0f} "
        f"| {median['crawl'] / median['worker']:.2f} "
        f"| {median['worker'] / median['in-process']:.2f} |"
    )
    lines.append(
        f"{AT_ONCE} PDFs read at once through one crawler (2 PDF workers): "
        f"{1000 * together:.0f} ms in all, {1000 * together / AT_ONCE:.0f} ms per PDF"
    )
    peaks = sorted(worker_peak_mib(case.data, PdfReader().limits) for case in cases)
    lines.append(
        f"PDF worker peak RSS: median {statistics.median(peaks):.0f} MiB, largest {peaks[-1]} MiB; "
        f"this process (origin, downloader, crawl): {_peak_mib(resource.RUSAGE_SELF):.0f} MiB"
    )
    return lines


def main() -> None:
    """Run the benchmark and print the table."""
    for line in asyncio.run(run()):
        print(line)


if __name__ == "__main__":
    main()
